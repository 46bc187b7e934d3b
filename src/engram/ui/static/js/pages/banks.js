// The bank list, each bank with its stats.

import { api, bankPath } from "../api.js";
import { clear, fmtCount, fmtDate, h, pageRange } from "../dom.js";

const PAGE = 50;

function statCell(stats, pick) {
  if (stats === undefined) return h("td", { class: "num muted" }, "…");
  if (stats === null) return h("td", { class: "num muted" }, "–");
  return h("td", { class: "num" }, fmtCount(pick(stats)));
}

export async function renderBanks(ctx) {
  const q = ctx.params.get("q") || "";
  const offset = Number(ctx.params.get("offset") || 0);
  const list = await api("GET", "/banks", { query: { q, limit: PAGE, offset } });
  if (!ctx.alive()) return;

  const search = h("input", { type: "search", name: "q", value: q, placeholder: "Search banks" });
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        location.hash = search.value ? `#/?q=${encodeURIComponent(search.value)}` : "#/";
      },
    },
    search,
    h("button", { type: "submit" }, "Search"),
  );

  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "grid banks" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Bank", "Facts", "Observations", "Documents", "Links", "Pending ops", "Failed ops", "Last write"].map((t, i) =>
          h("th", { class: i > 0 && i < 7 ? "num" : null }, t),
        ),
      ),
    ),
    tbody,
  );
  const rows = list.banks.map((bank) => {
    const row = h("tr", { "data-bank": bank.bank_id });
    const fill = (stats) => {
      const facts = stats ? (stats.nodes_by_fact_type.world || 0) + (stats.nodes_by_fact_type.experience || 0) : 0;
      clear(
        row,
        h(
          "td",
          {},
          h("a", { href: `#/b/${encodeURIComponent(bank.bank_id)}` }, bank.bank_id),
          bank.name && bank.name !== bank.bank_id ? h("div", { class: "muted small" }, bank.name) : null,
        ),
        stats ? h("td", { class: "num" }, fmtCount(facts)) : h("td", { class: "num" }, fmtCount(bank.fact_count)),
        statCell(stats, (s) => s.total_observations),
        statCell(stats, (s) => s.total_documents),
        statCell(stats, (s) => s.total_links),
        statCell(stats, (s) => s.pending_operations),
        statCell(stats, (s) => s.failed_operations),
        h("td", {}, fmtDate(bank.last_write_at || bank.updated_at)),
      );
    };
    fill(undefined);
    api("GET", `${bankPath(bank.bank_id)}/stats`)
      .then((stats) => ctx.alive() && fill(stats))
      .catch(() => ctx.alive() && fill(null));
    return row;
  });
  tbody.append(...rows);

  const pager = h(
    "div",
    { class: "pager" },
    pageRange(offset, list.banks.length, list.total),
    offset > 0
      ? h("a", { href: `#/?q=${encodeURIComponent(q)}&offset=${Math.max(0, offset - PAGE)}` }, "‹ Previous")
      : null,
    offset + PAGE < list.total ? h("a", { href: `#/?q=${encodeURIComponent(q)}&offset=${offset + PAGE}` }, "Next ›") : null,
  );

  clear(
    ctx.main,
    h("h1", {}, "Banks"),
    form,
    list.banks.length
      ? h("div", { class: "card flush" }, table)
      : h("p", { class: "muted" }, q ? "No bank matches." : "No banks yet: retain something to create one."),
    pager,
  );
}
