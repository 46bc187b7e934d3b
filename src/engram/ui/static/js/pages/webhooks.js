// Webhooks: the bank's webhooks with their latest deliveries (status, attempts, response, latency,
// error), a form to add one, and enable / disable / delete.

import { api, bankPath } from "../api.js";
import { badge, clear, errorBox, fmtDate, h, notice, section, shortId } from "../dom.js";

const EVENTS = ["retain.completed", "consolidation.completed", "mental_model.refreshed"];
const DELIVERIES = 10;

function deliveriesTable(items) {
  if (!items.length) return h("p", { class: "muted empty" }, "No deliveries yet.");
  return h(
    "table",
    { class: "deliveries" },
    h("thead", {}, h("tr", {}, ["Event", "Status", "Attempts", "Response", "Latency", "Last attempt", "Error"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      items.map((d) =>
        h(
          "tr",
          { "data-id": d.id, "data-status": d.status },
          h("td", {}, d.event_type),
          h("td", {}, badge(d.status)),
          h("td", { class: "num" }, String(d.attempts)),
          h("td", { class: "num" }, d.last_response_status == null ? "" : String(d.last_response_status)),
          h("td", { class: "num" }, d.last_latency_ms == null ? "" : `${Math.round(d.last_latency_ms)} ms`),
          h("td", { class: "nowrap" }, fmtDate(d.last_attempt_at)),
          h("td", { class: "error-cell" }, d.last_error || (d.next_retry_at ? `retry at ${fmtDate(d.next_retry_at)}` : "")),
        ),
      ),
    ),
  );
}

export async function renderWebhooks(ctx) {
  const base = `${bankPath(ctx.bankId)}/webhooks`;
  const message = h("div", { id: "webhooks-message" });
  const list = h("div", { id: "webhooks-list" });

  async function act(method, path, body, done) {
    try {
      await api(method, `${base}${path}`, body ? { body } : {});
      clear(message, notice(done));
    } catch (error) {
      clear(message, errorBox(error));
    }
    await refresh();
  }

  async function card(hook) {
    const deliveries = await api("GET", `${base}/${hook.id}/deliveries`, { query: { limit: DELIVERIES } });
    return h(
      "section",
      { class: "card webhook", "data-id": hook.id },
      h("h2", {}, h("code", {}, hook.url), " ", badge(hook.enabled ? "enabled" : "disabled")),
      h("p", { class: "small muted" }, `${shortId(hook.id)} · ${hook.event_types.join(", ")} · ${hook.has_secret ? "signed" : "unsigned"}`),
      h(
        "div",
        { class: "actions" },
        h("button", { class: "small-button secondary toggle", onclick: () =>
          act("PATCH", `/${hook.id}`, { enabled: !hook.enabled }, hook.enabled ? "Webhook disabled." : "Webhook enabled.") },
          hook.enabled ? "Disable" : "Enable"),
        h("button", { class: "small-button secondary delete", onclick: () => act("DELETE", `/${hook.id}`, null, "Webhook deleted.") }, "Delete"),
      ),
      deliveriesTable(deliveries.items),
    );
  }

  async function refresh() {
    let hooks;
    try {
      hooks = await api("GET", base, { query: { limit: 100 } });
    } catch (error) {
      if (ctx.alive()) clear(list, errorBox(error));
      return;
    }
    const cards = await Promise.all(hooks.items.map(card));
    if (!ctx.alive()) return;
    clear(list, cards.length ? cards : h("p", { class: "muted empty" }, "No webhooks."));
  }

  const form = h(
    "form",
    { id: "webhook-form", class: "stack" },
    h("label", {}, "URL ", h("input", { name: "url", type: "url", required: true, placeholder: "https://example.com/hook", size: 50 })),
    h("label", {}, "Secret ", h("input", { name: "secret", type: "password", placeholder: "optional: signs each delivery" })),
    h("div", {}, EVENTS.map((event) => h("label", { class: "inline" }, h("input", { type: "checkbox", name: "event", value: event, checked: event === "retain.completed" }), ` ${event} `))),
    h("button", { type: "submit" }, "Add webhook"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { url: data.get("url"), event_types: data.getAll("event") };
    if (data.get("secret")) body.secret = data.get("secret");
    await act("POST", "", body, "Webhook added.");
  });

  clear(ctx.main, h("h1", {}, "Webhooks"), message, section("Add a webhook", form), list);
  await refresh();
  const timer = setInterval(refresh, 3000);
  ctx.onLeave(() => clearInterval(timer));
}
