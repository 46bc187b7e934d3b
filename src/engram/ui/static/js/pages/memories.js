// The memories table: filters by type, text, tags (with tags_match) and consolidation state; paging.
// Filters live in the hash, so a filtered view can be linked and the back button works.

import { api, bankPath } from "../api.js";
import { consolidationOffNotice, consolidationStatus } from "../consolidation.js";
import { bankHref } from "../links.js";
import { badge, clear, fmtCount, fmtDate, h, pageRange, splitList, tagChips } from "../dom.js";

const TYPES = ["", "world", "experience", "observation"];
const MATCHES = ["any", "all", "any_strict", "all_strict", "exact"];
const STATES = ["", "pending", "consolidated", "failed"];
const FILTERS = ["type", "q", "tags", "tags_match", "consolidation_state", "limit"];

function select(name, options, value, labels = {}) {
  return h(
    "select",
    { name },
    options.map((option) => h("option", { value: option, selected: option === value }, labels[option] || option || "any")),
  );
}

function consolidation(item, status) {
  if (item.fact_type === "observation") return h("span", { class: "muted" }, `${fmtCount(item.proof_count)} proofs`);
  if (item.consolidation_failed_at && !item.consolidated_at) return badge("failed", "failed");
  if (item.consolidated_at) return badge("consolidated", "completed");
  if (!status.enabled) return h("span", { class: "badge badge-off", title: `consolidation is off: ${status.reason}` }, "off");
  return badge("pending", "pending");
}

export async function renderMemories(ctx) {
  const p = ctx.params;
  const limit = Number(p.get("limit") || 50);
  const offset = Number(p.get("offset") || 0);
  const tags = splitList(p.get("tags"));
  const listing = api("GET", `${bankPath(ctx.bankId)}/memories/list`, {
    query: {
      type: p.get("type"),
      q: p.get("q"),
      tags: tags.length ? tags : null,
      tags_match: tags.length ? p.get("tags_match") || "any" : null,
      consolidation_state: p.get("consolidation_state"),
      limit,
      offset,
    },
  });
  const [result, status] = await Promise.all([listing, consolidationStatus(ctx.bankId)]);
  if (!ctx.alive()) return;

  const form = h(
    "form",
    {
      class: "filters",
      id: "memory-filters",
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        const params = {};
        for (const name of FILTERS) if (data.get(name)) params[name] = data.get(name);
        location.hash = bankHref(ctx.bankId, "memories", params);
      },
    },
    h("label", {}, "Type ", select("type", TYPES, p.get("type") || "")),
    h("label", {}, "Text ", h("input", { type: "search", name: "q", value: p.get("q") || "", placeholder: "contains…" })),
    h("label", {}, "Tags ", h("input", { name: "tags", value: p.get("tags") || "", placeholder: "tag1, tag2" })),
    h("label", {}, "Match ", select("tags_match", MATCHES, p.get("tags_match") || "any")),
    h(
      "label",
      {},
      "Consolidation ",
      select("consolidation_state", STATES, p.get("consolidation_state") || ""),
    ),
    h("label", {}, "Per page ", select("limit", ["25", "50", "100", "200"], String(limit))),
    h("button", { type: "submit" }, "Apply"),
    h("a", { class: "button-link", href: bankHref(ctx.bankId, "memories") }, "Reset"),
  );

  const rows = result.items.map((item) =>
    h(
      "tr",
      { "data-id": item.id, "data-type": item.fact_type },
      h("td", { class: "text-cell" }, h("a", { href: bankHref(ctx.bankId, `memories/${item.id}`) }, item.text)),
      h("td", {}, badge(item.fact_type)),
      h("td", { class: "nowrap" }, fmtDate(item.date)),
      h("td", { class: "small" }, item.entities),
      h("td", {}, tagChips(item.tags, "")),
      h("td", {}, consolidation(item, status)),
    ),
  );

  const page = (to) => {
    const params = {};
    for (const name of FILTERS) if (p.get(name)) params[name] = p.get(name);
    params.offset = String(to);
    return bankHref(ctx.bankId, "memories", params);
  };
  const pager = h(
    "div",
    { class: "pager" },
    h("span", { id: "memory-count" }, pageRange(offset, result.items.length, result.total)),
    offset > 0 ? h("a", { href: page(Math.max(0, offset - limit)) }, "‹ Previous") : null,
    offset + limit < result.total ? h("a", { href: page(offset + limit) }, "Next ›") : null,
  );

  clear(
    ctx.main,
    h("h1", {}, "Memories"),
    status.enabled ? null : consolidationOffNotice(ctx.bankId, status),
    form,
    result.items.length
      ? h(
          "div",
          { class: "card flush" },
          h(
            "table",
            { class: "grid memories" },
            h(
              "thead",
              {},
              h("tr", {}, ["Text", "Type", "Date", "Entities", "Tags", "Consolidation"].map((t) => h("th", {}, t))),
            ),
            h("tbody", {}, rows),
          ),
        )
      : h("p", { class: "muted empty" }, "No memories match these filters."),
    pager,
  );
}
