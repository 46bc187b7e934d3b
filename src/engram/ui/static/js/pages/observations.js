// Observations grouped by scope (the tag set they were consolidated under); scopes never mix.

import { api, bankPath } from "../api.js";
import { clear, fmtCount, fmtDate, h, section, tagChips } from "../dom.js";
import { bankHref } from "../links.js";

const SCOPES = 50;
const PER_SCOPE = 25;

async function scopeObservations(ctx, tags) {
  const base = `${bankPath(ctx.bankId)}/memories/list`;
  if (tags.length) {
    const result = await api("GET", base, {
      query: { type: "observation", tags, tags_match: "exact", limit: PER_SCOPE },
    });
    return { items: result.items, total: result.total };
  }
  // A query string cannot carry an empty tag list: the untagged scope has its own flag.
  const result = await api("GET", base, { query: { type: "observation", untagged: true, limit: PER_SCOPE } });
  return { items: result.items, total: result.total };
}

function observationRow(ctx, item) {
  return h(
    "tr",
    { "data-id": item.id },
    h("td", { class: "text-cell" }, h("a", { href: bankHref(ctx.bankId, `memories/${item.id}`) }, item.text)),
    h("td", { class: "num" }, fmtCount(item.proof_count)),
    h("td", { class: "nowrap" }, fmtDate(item.updated_at)),
  );
}

export async function renderObservations(ctx) {
  const scopes = await api("GET", `${bankPath(ctx.bankId)}/observations/scopes`, { query: { limit: SCOPES } });
  if (!ctx.alive()) return;
  if (!scopes.scopes.length) {
    clear(
      ctx.main,
      h("h1", {}, "Observations"),
      h(
        "p",
        { class: "muted empty" },
        "No observations yet. They are consolidated from facts in the background when an LLM is configured.",
      ),
    );
    return;
  }
  const groups = await Promise.all(
    scopes.scopes.map(async (scope) => ({ scope, result: await scopeObservations(ctx, scope.tags) })),
  );
  if (!ctx.alive()) return;
  clear(
    ctx.main,
    h("h1", {}, "Observations"),
    h(
      "p",
      { class: "muted" },
      `${fmtCount(scopes.total)} scope${scopes.total === 1 ? "" : "s"}. Each scope is consolidated on its own: its observations never see another scope's facts.`,
    ),
    groups.map(({ scope, result }) =>
      h(
        "section",
        { class: "card scope", "data-scope": scope.tags.join(",") },
        h(
          "h2",
          {},
          scope.tags.length ? tagChips(scope.tags) : h("span", { class: "chip global" }, "global (untagged)"),
          h("span", { class: "muted small" }, ` ${fmtCount(scope.count)} observation${scope.count === 1 ? "" : "s"}`),
        ),
        h(
          "table",
          { class: "grid observations" },
          h("thead", {}, h("tr", {}, h("th", {}, "Observation"), h("th", { class: "num proofs" }, "Proofs"), h("th", { class: "updated" }, "Updated"))),
          h("tbody", {}, result.items.map((item) => observationRow(ctx, item))),
        ),
        result.total > result.items.length
          ? h(
              "a",
              {
                class: "small",
                href: bankHref(ctx.bankId, "memories", {
                  type: "observation",
                  tags: scope.tags.join(","),
                  tags_match: "exact",
                }),
              },
              `All ${fmtCount(result.total)} →`,
            )
          : null,
      ),
    ),
  );
}
