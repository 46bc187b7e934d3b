// LLM traces: the bank's LLM calls newest first (operation, scope, model, status, tokens, latency),
// each expandable to its stored request and answer, and the last day's calls as a chart.

import { api, bankPath } from "../api.js";
import { barChart } from "../bars.js";
import { badge, clear, errorBox, fmtDate, h, section } from "../dom.js";

const PAGE = 50;

export async function renderTraces(ctx) {
  const base = `${bankPath(ctx.bankId)}/llm-requests`;
  const [listed, stats] = await Promise.all([
    api("GET", base, { query: { limit: PAGE } }),
    api("GET", `${base}/stats`, { query: { period: "1d" } }),
  ]);
  if (!ctx.alive()) return;
  const detail = h("div", { id: "trace-detail" });
  const tokens = stats.buckets.reduce((sum, b) => sum + b.tokens.total, 0);

  function open(entry) {
    try {
      clear(detail, section(`${entry.operation || "–"} · ${entry.scope} · ${fmtDate(entry.started_at)}`,
        entry.error ? h("div", { class: "error" }, entry.error) : null,
        h("h3", {}, "Request"), h("pre", { class: "trace-input" }, JSON.stringify(entry.input, null, 2)),
        h("h3", {}, "Answer"), h("pre", { class: "trace-output" }, JSON.stringify(entry.output, null, 2))));
    } catch (error) {
      clear(detail, errorBox(error));
    }
  }

  const rows = listed.items.map((e) =>
    h("tr", { "data-id": e.id, "data-status": e.status },
      h("td", { class: "nowrap" }, fmtDate(e.started_at)),
      h("td", {}, h("a", { href: "javascript:void 0", onclick: () => open(e) }, e.operation || "–")),
      h("td", {}, e.scope || ""),
      h("td", {}, e.model || ""),
      h("td", {}, badge(e.status)),
      h("td", { class: "num" }, e.total_tokens == null ? "" : String(e.total_tokens)),
      h("td", { class: "num" }, `${e.duration_ms} ms`)));
  clear(
    ctx.main,
    h("h1", {}, "LLM traces"),
    section(`Last 24 hours · ${tokens} tokens`, barChart(stats.buckets, "LLM calls per hour")),
    h("p", { id: "traces-count", class: "muted" }, `${listed.total} calls`),
    listed.items.length
      ? h("table", { class: "traces" },
          h("thead", {}, h("tr", {}, ["When", "Operation", "Scope", "Model", "Status", "Tokens", "Latency"].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows))
      : h("p", { class: "muted empty" }, "No LLM calls traced (is ENGRAM_LLM_TRACE_ENABLED on?)."),
    detail,
  );
}
