// The recall playground: run a recall with its trace and see, for each result, its rank in every
// retrieval arm, the fused score and the final score.

import { api, bankPath } from "../api.js";
import { badge, clear, errorBox, fmtNumber, h, section, splitList, tagChips } from "../dom.js";
import { bankHref } from "../links.js";

const ARM_ORDER = ["semantic", "keyword", "graph", "temporal"];
const TYPES = ["world", "experience", "observation"];
const MATCHES = ["any", "all", "any_strict", "all_strict", "exact"];

function armsOf(trace) {
  const seen = new Set(Object.keys(trace.arms || {}));
  for (const entry of trace.results || []) for (const arm of Object.keys(entry.ranks || {})) seen.add(arm);
  return [...ARM_ORDER.filter((a) => seen.has(a)), ...[...seen].filter((a) => !ARM_ORDER.includes(a))];
}

function traceSummary(trace) {
  const arms = Object.entries(trace.arms || {}).map(([name, arm]) =>
    h("span", { class: "chip" }, `${name}: ${arm.count} in ${fmtNumber(arm.ms, 1)} ms`),
  );
  const freshness = trace.observations_freshness;
  return h(
    "div",
    { class: "trace-summary" },
    h("div", { class: "chips" }, arms),
    h(
      "p",
      { class: "muted small" },
      `budget ${trace.budget} (${trace.candidates_per_arm} per arm) · embed ${fmtNumber(trace.embed_ms, 1)} ms`,
      trace.rerank_ms != null ? ` · rerank ${fmtNumber(trace.rerank_ms, 1)} ms` : "",
      trace.fetch_ms != null ? ` · fetch ${fmtNumber(trace.fetch_ms, 1)} ms` : "",
      ` · total ${fmtNumber(trace.total_ms, 1)} ms`,
      trace.temporal_window ? ` · time window ${trace.temporal_window.start} → ${trace.temporal_window.end}` : "",
      freshness ? ` · observations ${freshness.state}${freshness.pending_facts ? ` (${freshness.pending_facts} facts pending)` : ""}` : "",
    ),
  );
}

function resultsTable(ctx, response) {
  const trace = response.trace || {};
  const arms = armsOf(trace);
  const byId = new Map((trace.results || []).map((entry) => [entry.id, entry]));
  const rows = response.results.map((result, i) => {
    const entry = byId.get(result.id) || {};
    const ranks = entry.ranks || {};
    return h(
      "tr",
      { "data-id": result.id },
      h("td", { class: "num" }, String(i + 1)),
      h(
        "td",
        { class: "text-cell" },
        h("a", { href: bankHref(ctx.bankId, `memories/${result.id}`) }, result.text),
        result.tags && result.tags.length ? h("div", {}, tagChips(result.tags)) : null,
      ),
      h("td", {}, badge(result.type || "?", result.type)),
      arms.map((arm) => h("td", { class: `num arm arm-${arm}` }, ranks[arm] != null ? `#${ranks[arm]}` : "–")),
      h("td", { class: "num" }, fmtNumber(entry.fused, 4)),
      h("td", { class: "num final" }, fmtNumber(result.scores?.final ?? entry.final, 3)),
    );
  });
  return h(
    "table",
    { class: "grid recall-results" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "#"), h("th", {}, "Memory"), h("th", {}, "Type"), arms.map((arm) => h("th", { class: "num" }, arm)),
        h("th", { class: "num" }, "Fused"), h("th", { class: "num" }, "Final")),
    ),
    h("tbody", {}, rows),
  );
}

export async function renderRecall(ctx) {
  const output = h("div", { id: "recall-output" });
  const form = h(
    "form",
    { class: "playground", id: "recall-form" },
    h("textarea", { name: "query", rows: 2, placeholder: "What do you want to recall?", required: true }),
    h(
      "div",
      { class: "filters" },
      h("label", {}, "Budget ", h("select", { name: "budget" }, ["low", "mid", "high"].map((b) => h("option", { value: b, selected: b === "mid" }, b)))),
      h("label", {}, "Max tokens ", h("input", { name: "max_tokens", type: "number", min: 1, value: 4096 })),
      h("span", { class: "checks" }, TYPES.map((t) => h("label", {}, h("input", { type: "checkbox", name: "types", value: t, checked: t !== "observation" }), ` ${t}`))),
      h("label", {}, "Tags ", h("input", { name: "tags", placeholder: "tag1, tag2" })),
      h("label", {}, "Match ", h("select", { name: "tags_match" }, MATCHES.map((m) => h("option", { value: m }, m)))),
      h("button", { type: "submit" }, "Recall"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const tags = splitList(data.get("tags"));
    const body = {
      query: data.get("query"),
      budget: data.get("budget"),
      max_tokens: Number(data.get("max_tokens")) || 4096,
      types: data.getAll("types"),
      trace: true,
    };
    if (tags.length) Object.assign(body, { tags, tags_match: data.get("tags_match") });
    clear(output, h("p", { class: "muted" }, "Recalling…"));
    try {
      const response = await api("POST", `${bankPath(ctx.bankId)}/memories/recall`, { body });
      if (!ctx.alive()) return;
      clear(
        output,
        section(
          `${response.results.length} result${response.results.length === 1 ? "" : "s"}`,
          response.trace ? traceSummary(response.trace) : null,
          response.results.length ? resultsTable(ctx, response) : h("p", { class: "muted" }, "Nothing relevant found."),
        ),
      );
    } catch (error) {
      if (ctx.alive()) clear(output, errorBox(error));
    }
  });
  clear(
    ctx.main,
    h("h1", {}, "Recall playground"),
    h("p", { class: "muted" }, "Runs a recall with its trace: each arm's rank (– = the arm did not find it), the fused score, and the final score after recency, time and proof boosts."),
    section(null, form),
    output,
  );
}
