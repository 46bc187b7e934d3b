// The entity-label builder: a bank's controlled vocabulary as a form — groups with a key and a type,
// allowed values for `value` / `multi-values`, typed fields (nested up to four levels) for `map`.
// The server validates; a 400 names the entry (`updates.entity_labels[0].fields.tier.values`) and
// the builder outlines it.

import { saveConfig } from "../api.js";
import { clear, clearFlash, errorBox, h, markInvalid, section } from "../dom.js";

const TYPES = [
  ["value", "value: one of the values"],
  ["multi-values", "multi-values: several of the values"],
  ["text", "text: free text (needs an LLM)"],
  ["map", "map: named, typed fields (needs an LLM)"],
];
const ENUM_TYPES = new Set(["value", "multi-values"]);
const MAX_DEPTH = 4;

// --- wire format <-> editable state (fields as an ordered list instead of an object) ---------------

function fromWireValues(values) {
  return (values || []).map((v) => ({ value: v.value ?? "", description: v.description ?? "" }));
}

function fromWireFields(fields) {
  return Object.entries(fields || {}).map(([name, f]) => ({
    name,
    type: f.type || "value",
    description: f.description ?? "",
    values: fromWireValues(f.values),
    fields: fromWireFields(f.fields),
  }));
}

function fromWire(groups) {
  return (groups || []).map((g) => ({
    key: g.key ?? "",
    type: g.type || "value",
    description: g.description ?? "",
    optional: g.optional !== false,
    tag: Boolean(g.tag),
    values: fromWireValues(g.values),
    fields: fromWireFields(g.fields),
  }));
}

function toWireShape(item, out) {
  if (item.description) out.description = item.description;
  if (ENUM_TYPES.has(item.type)) {
    out.values = item.values.map((v) => (v.description ? { value: v.value, description: v.description } : { value: v.value }));
  }
  if (item.type === "map") {
    out.fields = Object.fromEntries(item.fields.map((f) => [f.name, toWireShape(f, { type: f.type })]));
  }
  return out;
}

export function toWire(groups) {
  return groups.map((g) => toWireShape(g, { key: g.key, type: g.type, optional: g.optional, tag: g.tag }));
}

// --- the form ---------------------------------------------------------------------------------------

function typeSelect(item, onChange) {
  return h(
    "select",
    { class: "label-type", onchange: (e) => onChange(e.target.value) },
    TYPES.map(([value, label]) => h("option", { value, selected: value === item.type }, label)),
  );
}

function textInput(item, name, { onedit, ...attrs } = {}) {
  return h("input", {
    value: item[name],
    ...attrs,
    oninput: (e) => {
      item[name] = e.target.value;
      onedit?.();
    },
  });
}

export function labelsEditor(ctx, config, reload) {
  let groups = fromWire(config.config.entity_labels);
  const freeForm = h("input", { type: "checkbox", checked: config.config.entities_allow_free_form !== false });
  const message = h("div", { class: "message", id: "labels-message" });
  const builder = h("div", { class: "label-builder", id: "label-builder" });
  const jsonBox = h("textarea", { class: "json-edit", rows: 10, spellcheck: "false" });
  const syncJson = () => {
    jsonBox.value = JSON.stringify(toWire(groups), null, 2);
  };

  function valuesBlock(item, path) {
    return h(
      "div",
      { class: "label-values", "data-path": `${path}.values` },
      h("div", { class: "small muted" }, "Allowed values (a description helps the offline classifier)"),
      item.values.map((v, j) =>
        h(
          "div",
          { class: "row value-row", "data-path": `${path}.values.${j}` },
          textInput(v, "value", { placeholder: "value", class: "label-value", onedit: syncJson }),
          textInput(v, "description", { placeholder: "description (optional)", class: "grow", onedit: syncJson }),
          h("button", { type: "button", class: "icon-button", title: "Remove value", onclick: () => { item.values.splice(j, 1); render(); } }, "×"),
        ),
      ),
      h("button", { type: "button", class: "small-button secondary add-value", onclick: () => { item.values.push({ value: "", description: "" }); render(); } }, "+ value"),
    );
  }

  function fieldsBlock(item, path, depth) {
    return h(
      "div",
      { class: "label-fields", "data-path": `${path}.fields` },
      h("div", { class: "small muted" }, "Fields"),
      item.fields.map((field, j) => {
        const fieldPath = `${path}.fields.${field.name}`;
        return h(
          "div",
          { class: "label-field", "data-path": fieldPath },
          h(
            "div",
            { class: "row" },
            textInput(field, "name", { placeholder: "field name", class: "field-name", onedit: syncJson }),
            typeSelect(field, (type) => { field.type = type; render(); }),
            textInput(field, "description", { placeholder: "description", class: "grow", onedit: syncJson }),
            h("button", { type: "button", class: "icon-button", title: "Remove field", onclick: () => { item.fields.splice(j, 1); render(); } }, "×"),
          ),
          shapeBlock(field, fieldPath, depth + 1),
        );
      }),
      depth < MAX_DEPTH
        ? h("button", {
            type: "button",
            class: "small-button secondary add-field",
            onclick: () => { item.fields.push({ name: "", type: "value", description: "", values: [], fields: [] }); render(); },
          }, "+ field")
        : h("div", { class: "small muted" }, `maps nest at most ${MAX_DEPTH} levels`),
    );
  }

  function shapeBlock(item, path, depth) {
    if (ENUM_TYPES.has(item.type)) return valuesBlock(item, path);
    if (item.type === "map") return fieldsBlock(item, path, depth);
    return h("div", { class: "small muted" }, "Free text under this key.");
  }

  function groupCard(group, i) {
    const path = `entity_labels[${i}]`;
    return h(
      "div",
      { class: "label-group", "data-path": path },
      h(
        "div",
        { class: "row" },
        h("label", { "data-path": `${path}.key` }, "Key ", textInput(group, "key", { placeholder: "e.g. priority", class: "label-key", onedit: syncJson })),
        h("label", {}, "Type ", typeSelect(group, (type) => { group.type = type; render(); })),
        h("label", {}, h("input", { type: "checkbox", checked: group.optional, onchange: (e) => { group.optional = e.target.checked; syncJson(); } }), " optional"),
        h("label", { title: "Also write key:value into the memory's tags" }, h("input", { type: "checkbox", class: "label-tag", checked: group.tag, onchange: (e) => { group.tag = e.target.checked; syncJson(); } }), " tag"),
        h("span", { class: "grow" }),
        h("button", { type: "button", class: "small-button danger", onclick: () => { groups.splice(i, 1); render(); } }, "Remove group"),
      ),
      h("label", { class: "block" }, "Description ", textInput(group, "description", { placeholder: "what this label means", class: "grow", onedit: syncJson })),
      shapeBlock(group, path, 1),
    );
  }

  function render() {
    clear(
      builder,
      groups.length ? groups.map(groupCard) : h("p", { class: "muted" }, "No label groups: entities are free-form only."),
      h("button", {
        type: "button",
        id: "add-label-group",
        class: "secondary",
        onclick: () => {
          groups.push({ key: "", type: "value", description: "", optional: true, tag: false, values: [{ value: "", description: "" }], fields: [] });
          render();
        },
      }, "+ label group"),
    );
    syncJson();
  }

  async function save() {
    clearFlash();
    const updates = { entity_labels: groups.length ? toWire(groups) : null };
    if (freeForm.checked !== (config.config.entities_allow_free_form !== false)) {
      updates.entities_allow_free_form = freeForm.checked;
    }
    try {
      await saveConfig(ctx.bankId, updates);
      reload(`Entity labels saved (${groups.length} group${groups.length === 1 ? "" : "s"}).`);
    } catch (error) {
      render(); // data-paths follow renamed fields
      clear(message, errorBox(error));
      markInvalid(builder, error.field ? error.field.replace(/^updates\./, "") : null);
    }
  }

  render();
  return section(
    "Entity labels",
    h(
      "p",
      { class: "muted small" },
      "Each value becomes an entity key:value; with an LLM the groups constrain extraction, without one value groups are picked by similarity.",
    ),
    message,
    builder,
    h("label", { class: "block" }, freeForm, " keep free-form entities too (entities_allow_free_form)"),
    h(
      "details",
      { class: "json-panel" },
      h("summary", {}, "JSON"),
      jsonBox,
      h("button", {
        type: "button",
        class: "small-button secondary",
        onclick: () => {
          try {
            const parsed = JSON.parse(jsonBox.value || "[]");
            groups = fromWire(Array.isArray(parsed) ? parsed : []);
            clear(message);
            render();
          } catch (error) {
            clear(message, errorBox(new Error(`not valid JSON: ${error.message}`)));
          }
        },
      }, "Load JSON into the builder"),
    ),
    h("div", { class: "actions" }, h("button", { type: "button", id: "save-labels", onclick: save }, "Save entity labels")),
  );
}
