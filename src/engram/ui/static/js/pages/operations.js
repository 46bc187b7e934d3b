// Operations: the bank's async work with its progress, refreshed every two seconds; failed or
// cancelled ones can be retried, pending ones cancelled.

import { api, bankPath } from "../api.js";
import { badge, clear, errorBox, fmtCount, fmtDate, h, notice, pageRange, shortId } from "../dom.js";
import { bankHref } from "../links.js";

const REFRESH_MS = 2000;
const PAGE = 50;
const STATUSES = ["", "pending", "processing", "completed", "failed", "cancelled"];

function progressCell(op) {
  const progress = op.progress;
  if (!progress) return h("span", { class: "muted" }, op.status === "pending" ? "waiting" : "–");
  const { processed, total, stage } = progress;
  const done = op.status === "completed";
  const ratio = done ? 1 : total ? Math.min(1, (processed || 0) / total) : 0;
  return h(
    "div",
    { class: "progress-cell" },
    h("div", { class: "progress" }, h("div", { class: `progress-bar${done ? " done" : ""}`, style: `width:${Math.round(ratio * 100)}%` })),
    h("div", { class: "small muted" }, `${stage || ""}${total ? ` ${done ? total : processed || 0}/${total}` : ""}`),
  );
}

export async function renderOperations(ctx) {
  const base = `${bankPath(ctx.bankId)}/operations`;
  const status = ctx.params.get("status") || "";
  const offset = Number(ctx.params.get("offset") || 0);
  const message = h("div", { id: "operations-message" });
  const tableBox = h("div", { id: "operations-table" });
  const auto = h("input", { type: "checkbox", id: "auto-refresh", checked: true });
  let timer = null;

  async function act(op, method, path, verb) {
    try {
      await api(method, `${base}/${op.id}${path}`);
      clear(message, notice(`Operation ${shortId(op.id)} ${verb}.`));
    } catch (error) {
      clear(message, errorBox(error));
    }
    await refresh();
  }

  function row(op) {
    const actions = [];
    if (op.status === "failed" || op.status === "cancelled") {
      actions.push(h("button", { class: "small-button retry", onclick: () => act(op, "POST", "/retry", "queued again") }, "Retry"));
    }
    if (op.status === "pending") {
      actions.push(h("button", { class: "small-button secondary", onclick: () => act(op, "DELETE", "", "cancelled") }, "Cancel"));
    }
    return h(
      "tr",
      { "data-id": op.id, "data-status": op.status },
      h("td", {}, h("code", { title: op.id }, shortId(op.id))),
      h("td", {}, op.operation_type),
      h("td", {}, badge(op.status)),
      h("td", {}, progressCell(op)),
      h("td", { class: "num" }, fmtCount(op.items_count)),
      h("td", { class: "nowrap" }, fmtDate(op.created_at)),
      h("td", { class: "nowrap" }, fmtDate(op.updated_at)),
      h("td", { class: "num" }, String(op.retry_count)),
      h("td", { class: "error-cell" }, op.error_message || ""),
      h("td", {}, actions),
    );
  }

  async function refresh() {
    let result;
    try {
      result = await api("GET", base, { query: { status, limit: PAGE, offset } });
    } catch (error) {
      if (ctx.alive()) clear(tableBox, errorBox(error));
      return;
    }
    if (!ctx.alive()) return;
    const headers = ["Id", "Type", "Status", "Progress", "Items", "Created", "Updated", "Retries", "Error", ""];
    clear(
      tableBox,
      result.operations.length
        ? h(
            "div",
            { class: "card flush" },
            h(
              "table",
              { class: "grid operations" },
              h("thead", {}, h("tr", {}, headers.map((t) => h("th", { class: t === "Items" || t === "Retries" ? "num" : null }, t)))),
              h("tbody", {}, result.operations.map(row)),
            ),
          )
        : h("p", { class: "muted empty" }, "No operations."),
      h(
        "div",
        { class: "pager" },
        pageRange(offset, result.operations.length, result.total),
        offset > 0 ? h("a", { href: bankHref(ctx.bankId, "operations", { status, offset: Math.max(0, offset - PAGE) }) }, "‹ Previous") : null,
        offset + PAGE < result.total ? h("a", { href: bankHref(ctx.bankId, "operations", { status, offset: offset + PAGE }) }, "Next ›") : null,
      ),
    );
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!ctx.alive()) return;
      if (auto.checked && !document.hidden) await refresh();
      schedule();
    }, REFRESH_MS);
  }

  const filter = h(
    "select",
    {
      name: "status",
      onchange: (event) => {
        location.hash = bankHref(ctx.bankId, "operations", event.target.value ? { status: event.target.value } : null);
      },
    },
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s || "any status")),
  );
  await refresh();
  if (!ctx.alive()) return;
  clear(
    ctx.main,
    h("h1", {}, "Operations"),
    h(
      "div",
      { class: "filters" },
      h("label", {}, "Status ", filter),
      h("label", {}, auto, " auto-refresh"),
      h("button", { type: "button", class: "secondary", onclick: refresh }, "Refresh now"),
    ),
    message,
    tableBox,
  );
  schedule();
  ctx.onLeave(() => clearTimeout(timer));
}
