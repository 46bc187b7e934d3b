// The bank config editor: three tabs — the entity-label builder, the consolidation-strategies editor
// (with live preview) and every other setting. Saves are PATCH …/config; a 400 names the field.

import { api, bankPath, configSchema, saveConfig } from "../api.js";
import { llmConfigured, llmSettingNotice } from "../consolidation.js";
import { clear, clearFlash, errorBox, h, markInvalid, notice, section } from "../dom.js";
import { bankHref } from "../links.js";
import { labelsEditor } from "./labels.js";
import { strategiesEditor } from "./strategies.js";

const TABS = [
  ["labels", "Entity labels"],
  ["strategies", "Consolidation strategies"],
  ["settings", "All settings"],
];
const OWN_EDITORS = new Set(["entity_labels", "consolidation_strategies"]);

/** The input kind for a setting: from the schema's type when it has the setting, else from the value. */
function kindOf(value, prop) {
  const type = prop ? [].concat(prop.type).find((t) => t !== "null") : null;
  if (type === "boolean") return "bool";
  if (type === "integer" || type === "number") return "number";
  if (type === "string") return "string";
  if (type) return "json";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return "number";
  if (typeof value === "string") return "string";
  return "json";
}

/** The schema's rule for a setting in words: its range, choices or length. */
function rule(prop) {
  if (!prop) return "";
  const choices = (prop.enum || (prop.items && prop.items.enum) || []).filter((c) => c !== null);
  const words = prop.items ? "any of" : "one of";
  if (choices.length > 8) return `${words} ${choices.length} names (${choices.slice(0, 3).join(", ")}, …)`;
  if (choices.length) return `${words} ${choices.join(", ")}`;
  const low = prop.minimum ?? prop.exclusiveMinimum;
  if (low !== undefined && prop.maximum !== undefined) {
    return `${prop.exclusiveMinimum !== undefined ? ">" : ""}${low} … ${prop.maximum}`;
  }
  if (prop.maxLength) return `≤ ${prop.maxLength} characters`;
  return "";
}

function display(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The input's text as a config value: empty = null (back to the default). */
function parse(kind, text) {
  if (kind === "bool") return text === "true";
  if (text.trim() === "") return null;
  if (kind === "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    if (kind === "number") return text; // the server names the field and the type it wants
    return text;
  }
}

function settingsEditor(ctx, config, schema, reload) {
  const message = h("div", { class: "message" });
  const changed = new Map();
  const rows = Object.entries(config.config)
    .filter(([key]) => !OWN_EDITORS.has(key))
    .map(([key, value]) => {
      const prop = (schema.properties || {})[key];
      const kind = kindOf(value, prop);
      const overridden = Object.prototype.hasOwnProperty.call(config.overrides, key);
      const invalid = (config.invalid_overrides || {})[key];
      const original = kind === "bool" ? String(value) : display(value);
      const input =
        kind === "bool"
          ? h("select", {}, ["true", "false"].map((v) => h("option", { value: v, selected: v === original }, v)))
          : h("input", { value: original, placeholder: "default", class: kind === "number" ? "narrow" : null });
      input.addEventListener("input", () => {
        if (input.value === original) changed.delete(key);
        else changed.set(key, parse(kind, input.value));
        row.classList.toggle("changed", changed.has(key));
      });
      input.addEventListener("change", () => input.dispatchEvent(new Event("input")));
      const reset = overridden
        ? h("button", {
            type: "button",
            class: "small-button secondary",
            title: "Drop this bank's override",
            onclick: async () => {
              try {
                await saveConfig(ctx.bankId, { [key]: null });
                reload(`${key} reset to the default.`);
              } catch (error) {
                clear(message, errorBox(error));
              }
            },
          }, "Reset")
        : null;
      const row = h(
        "tr",
        { "data-path": key },
        h("th", {}, h("code", {}, key)),
        h("td", {}, input),
        h("td", { class: "muted small rule", title: prop && prop.items && prop.items.enum ? prop.items.enum.join(", ") : null },
          rule(prop)),
        h("td", {}, invalid
          ? h("span", { class: "badge badge-invalid", title: invalid }, "invalid — ignored")
          : overridden ? h("span", { class: "badge badge-override" }, "override") : h("span", { class: "muted small" }, "default")),
        h("td", {}, reset),
      );
      return row;
    });
  const table = h("table", { class: "grid settings" }, h("tbody", {}, rows));
  const save = async () => {
    clearFlash();
    if (!changed.size) {
      clear(message, notice("Nothing changed.", "info"));
      return;
    }
    try {
      await saveConfig(ctx.bankId, Object.fromEntries(changed));
      reload(`Saved ${changed.size} setting${changed.size === 1 ? "" : "s"}.`);
    } catch (error) {
      clear(message, errorBox(error));
      markInvalid(table, error.field ? error.field.replace(/^updates\./, "").split(/[.[]/)[0] : null);
    }
  };
  return section(
    "Settings",
    h("p", { class: "muted small" }, "Empty = the server's default. Objects and lists are JSON. Changed rows are highlighted."),
    message,
    table,
    h("div", { class: "actions sticky" }, h("button", { type: "button", id: "save-settings", onclick: save }, "Save settings")),
  );
}

export async function renderConfig(ctx) {
  const tab = ctx.params.get("tab") || "labels";
  const [config, scopes, llm, schema] = await Promise.all([
    api("GET", `${bankPath(ctx.bankId)}/config`),
    api("GET", `${bankPath(ctx.bankId)}/observations/scopes`, { query: { limit: 100 } }),
    llmConfigured(),
    configSchema().catch(() => ({ properties: {} })), // an older server: guess kinds from the values
  ]);
  if (!ctx.alive()) return;
  const flash = ctx.params.get("saved");
  const reload = (text) => {
    const params = { tab, saved: text, t: Date.now() };
    location.hash = bankHref(ctx.bankId, "config", params);
  };
  let body;
  if (tab === "strategies") body = strategiesEditor(ctx, config, scopes, reload);
  else if (tab === "settings") body = settingsEditor(ctx, config, schema, reload);
  else body = labelsEditor(ctx, config, reload);
  clear(
    ctx.main,
    h("h1", {}, "Config"),
    h(
      "nav",
      { class: "tabs" },
      TABS.map(([name, label]) =>
        h("a", { href: bankHref(ctx.bankId, "config", { tab: name }), class: name === tab ? "active" : null }, label),
      ),
    ),
    flash ? h("div", { id: "config-flash" }, notice(flash)) : null,
    llm ? null : llmSettingNotice(),
    body,
  );
}
