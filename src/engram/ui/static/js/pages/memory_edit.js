// Editing one memory (PATCH …/memories/{id}): its text and context, or invalidating / restoring it.

import { api, bankPath } from "../api.js";
import { clear, errorBox, h, notice, section } from "../dom.js";

export function editSection(ctx, memory, reload) {
  const text = h("textarea", { rows: 3, id: "edit-text", class: "wide" }, memory.text);
  const context = h("input", { type: "text", value: memory.context || "", id: "edit-context", placeholder: "context" });
  const out = h("div", {});
  const url = `${bankPath(ctx.bankId)}/memories/${encodeURIComponent(memory.id)}`;
  async function patch(body, done) {
    try {
      await api("PATCH", url, { body });
      clear(out, notice(done));
      reload();
    } catch (error) {
      clear(out, errorBox(error));
    }
  }
  function save(event) {
    event.preventDefault();
    patch({ text: text.value, context: context.value }, "Saved: embedded again, and back to consolidation");
  }
  const valid = memory.state !== "invalidated";
  const toggle = h("button", {
    type: "button", class: valid ? "danger" : "secondary", id: "edit-state",
    onclick: () => patch(valid ? { state: "invalidated", reason: "invalidated from the control plane" } : { state: "valid" },
      valid ? "Invalidated" : "Restored"),
  }, valid ? "Invalidate" : "Restore");
  return section(
    "Edit",
    h("form", { onsubmit: save, id: "edit-form" }, text, h("div", { class: "row" }, context,
      h("button", { type: "submit" }, "Save"), toggle)),
    memory.state === "invalidated" ? h("p", { class: "muted small" }, `Invalidated: ${memory.invalidation_reason || ""}`) : null,
    out,
  );
}
