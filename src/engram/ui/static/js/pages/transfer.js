// Moving a bank: export it to an archive (downloaded), import an archive into a new bank, clone it.

import { api, bankPath } from "../api.js";
import { clear, errorBox, h, notice, section } from "../dom.js";
import { bankHref } from "../links.js";
import { fetchBlob, saveBlob, upload, waitForOperation } from "../uploads.js";

async function run(ctx, out, submit, label) {
  try {
    const { operation_id: id } = await submit();
    clear(out, notice(`${label}…`));
    const status = await waitForOperation(ctx.bankId, id, (s) => {
      const p = s.progress || {};
      if (s.status === "processing") clear(out, notice(`${label}: ${p.stage || "working"} ${p.processed ?? ""}/${p.total ?? ""}`));
    }, ctx.alive);
    if (status.status !== "completed") throw new Error(status.error_message || status.status);
    return status.result_metadata || {};
  } catch (error) {
    clear(out, errorBox(error));
    return null;
  }
}

export function transferSection(ctx) {
  const base = bankPath(ctx.bankId);
  const out = h("div", { id: "transfer-result" });
  async function exportBank() {
    const result = await run(ctx, out, () => api("POST", `${base}/transfer/export`), "Exporting");
    if (!result) return;
    saveBlob(await fetchBlob(result.download_url), result.filename);
    clear(out, notice(`Exported ${result.document_count} documents, ${result.fact_count} facts (${result.byte_size} bytes)`));
  }
  const archive = h("input", { type: "file", accept: ".zip,application/zip", id: "import-archive" });
  const importTarget = h("input", { type: "text", placeholder: "new bank id", id: "import-target" });
  async function importBank(event) {
    event.preventDefault();
    if (!archive.files.length) return clear(out, errorBox(new Error("choose an archive first")));
    const form = new FormData();
    form.append("file", archive.files[0], archive.files[0].name);
    const target = importTarget.value.trim();
    const result = await run(ctx, out, () => upload(`${base}/transfer/import`, form, { target_bank_id: target }), "Importing");
    if (result) clear(out, notice(`Imported ${result.facts_imported} facts and ${result.observations_imported} observations into `),
      h("a", { href: bankHref(result.bank_id), id: "imported-bank" }, result.bank_id));
  }
  const cloneTarget = h("input", { type: "text", placeholder: "clone's bank id", id: "clone-target" });
  async function cloneBank(event) {
    event.preventDefault();
    const target = cloneTarget.value.trim();
    const result = await run(ctx, out, () => api("POST", `${base}/clone`, { query: { target_bank_id: target } }), "Cloning");
    if (result) clear(out, notice(`Cloned ${result.facts_imported} facts into `), h("a", { href: bankHref(target), id: "cloned-bank" }, target));
  }
  return section(
    "Move this bank",
    h("p", { class: "muted small" }, "Hindsight 1.1.0's transfer archive: a Hindsight export imports here, and back."),
    h("div", { class: "row" }, h("button", { class: "secondary", onclick: exportBank, id: "export-bank" }, "Export archive")),
    h("form", { class: "row", onsubmit: importBank }, archive, importTarget, h("button", { type: "submit", id: "import-bank" }, "Import")),
    h("form", { class: "row", onsubmit: cloneBank }, cloneTarget, h("button", { type: "submit", id: "clone-bank" }, "Clone")),
    out,
  );
}
