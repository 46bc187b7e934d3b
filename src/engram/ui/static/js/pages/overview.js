// One bank at a glance: counts by type, consolidation state, operations and its tags.

import { api, bankPath } from "../api.js";
import { consolidationOffNotice } from "../consolidation.js";
import { bankHref } from "../links.js";
import { clear, fmtCount, fmtDate, h, section } from "../dom.js";
import { aliasesSection } from "./aliases.js";

function stat(label, value, href = null) {
  const body = [h("div", { class: "stat-value" }, fmtCount(value ?? 0)), h("div", { class: "stat-label" }, label)];
  return href ? h("a", { class: "stat", href }, body) : h("div", { class: "stat" }, body);
}

export async function renderOverview(ctx) {
  const base = bankPath(ctx.bankId);
  const [stats, tags] = await Promise.all([
    api("GET", `${base}/stats`),
    api("GET", `${base}/tags`, { query: { limit: 100 } }),
  ]);
  if (!ctx.alive()) return;
  const byType = stats.nodes_by_fact_type || {};
  const memories = (params) => bankHref(ctx.bankId, "memories", params);
  const consolidationOff = stats.consolidation && !stats.consolidation.enabled;

  const cards = h(
    "div",
    { class: "stats" },
    stat("world facts", byType.world, memories({ type: "world" })),
    stat("experience facts", byType.experience, memories({ type: "experience" })),
    stat("observations", stats.total_observations, bankHref(ctx.bankId, "observations")),
    stat("documents", stats.total_documents),
    stat("links", stats.total_links),
    stat(
      consolidationOff ? "not consolidated (off)" : "awaiting consolidation",
      stats.pending_consolidation,
      memories({ consolidation_state: "pending" }),
    ),
    stat("failed consolidation", stats.failed_consolidation, memories({ consolidation_state: "failed" })),
    stat("pending operations", stats.pending_operations, bankHref(ctx.bankId, "operations")),
    stat("failed operations", stats.failed_operations, bankHref(ctx.bankId, "operations", { status: "failed" })),
  );

  const links = Object.entries(stats.links_by_link_type || {});
  const ops = Object.entries(stats.operations_by_status || {});
  clear(
    ctx.main,
    h("h1", {}, ctx.bankId),
    consolidationOff ? consolidationOffNotice(ctx.bankId, stats.consolidation) : null,
    cards,
    h(
      "div",
      { class: "columns" },
      section(
        "Activity",
        h(
          "table",
          { class: "kv" },
          h(
            "tbody",
            {},
            h("tr", {}, h("th", {}, "Last memory write"), h("td", {}, fmtDate(stats.last_memory_write_at) || "never")),
            h("tr", {}, h("th", {}, "Last consolidation"), h("td", {}, fmtDate(stats.last_consolidated_at) || "never")),
            h("tr", {}, h("th", {}, "Links by type"), h("td", {}, links.map(([k, v]) => `${k} ${fmtCount(v)}`).join(", ") || "none")),
            h("tr", {}, h("th", {}, "Operations"), h("td", {}, ops.map(([k, v]) => `${k} ${fmtCount(v)}`).join(", ") || "none")),
          ),
        ),
      ),
      section(
        `Tags (${fmtCount(tags.total)})`,
        tags.items.length
          ? h(
              "div",
              { class: "chips" },
              tags.items.map((t) =>
                h("a", { class: "chip", href: memories({ tags: t.tag, tags_match: "all_strict" }) }, `${t.tag} · ${fmtCount(t.count)}`),
              ),
            )
          : h("p", { class: "muted" }, "No tags."),
      ),
    ),
    aliasesSection(ctx),
  );
}
