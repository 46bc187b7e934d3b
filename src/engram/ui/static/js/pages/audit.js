// The audit log: entries newest first with action and transport filters, each expandable to its
// (redacted) request and response, and the last day's activity as a chart.

import { api, bankPath } from "../api.js";
import { barChart } from "../bars.js";
import { clear, errorBox, fmtDate, h, section, shortId } from "../dom.js";
import { bankHref } from "../links.js";

const PAGE = 50;

export async function renderAudit(ctx) {
  const base = `${bankPath(ctx.bankId)}/audit-logs`;
  const action = ctx.params.get("action") || "";
  const offset = Number(ctx.params.get("offset") || 0);
  const [listed, stats] = await Promise.all([
    api("GET", base, { query: { action: action || undefined, limit: PAGE, offset } }),
    api("GET", `${base}/stats`, { query: { period: "1d" } }),
  ]);
  if (!ctx.alive()) return;
  const detail = h("div", { id: "audit-detail" });

  async function open(entry) {
    try {
      const full = await api("GET", `${base}/${entry.id}`);
      clear(detail, section(`${full.action} · ${fmtDate(full.started_at)}`,
        h("h3", {}, "Request"), h("pre", { class: "audit-request" }, JSON.stringify(full.request, null, 2)),
        h("h3", {}, "Response"), h("pre", { class: "audit-response" }, JSON.stringify(full.response, null, 2))));
    } catch (error) {
      clear(detail, errorBox(error));
    }
  }

  const filter = h("form", { id: "audit-filter" },
    h("input", { name: "action", value: action, placeholder: "action, e.g. retain" }),
    h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new FormData(filter).get("action");
    location.hash = bankHref(ctx.bankId, "audit", chosen ? { action: chosen } : null);
  });
  const rows = listed.items.map((e) =>
    h("tr", { "data-id": e.id, "data-action": e.action },
      h("td", { class: "nowrap" }, fmtDate(e.started_at)),
      h("td", {}, h("a", { href: "javascript:void 0", onclick: () => open(e) }, e.action)),
      h("td", {}, e.transport),
      h("td", { class: "num" }, String(e.metadata.status_code ?? "")),
      h("td", { class: "num" }, `${e.duration_ms ?? ""} ms`),
      h("td", {}, h("code", {}, e.metadata.api_key_id || "–")),
      h("td", {}, h("code", { title: e.id }, shortId(e.id)))));
  clear(
    ctx.main,
    h("h1", {}, "Audit log"),
    section("Last 24 hours", barChart(stats.buckets, "audited requests per hour")),
    filter,
    h("p", { id: "audit-count", class: "muted" }, `${listed.total} entries`),
    listed.items.length
      ? h("table", { class: "audit" },
          h("thead", {}, h("tr", {}, ["When", "Action", "Transport", "Status", "Duration", "Key", "Id"].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows))
      : h("p", { class: "muted empty" }, "No entries (is ENGRAM_AUDIT_LOG_ENABLED on?)."),
    detail,
  );
}
