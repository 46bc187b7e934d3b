// A bank's documents: the list, uploading files (one operation per file, progress for each), and one
// document with its attachments (images inline), tag editor, reprocess and history.

import { api, bankPath } from "../api.js";
import { clear, errorBox, facts, fmtDate, h, notice, section, splitList, tagChips } from "../dom.js";
import { bankHref } from "../links.js";
import { fetchBlob, upload, waitForOperation } from "../uploads.js";
import { transferSection } from "./transfer.js";

function fileRow(file) {
  const state = h("span", { class: "muted" }, "waiting");
  const bar = h("progress", { max: 1, value: 0 });
  return { file, state, bar, row: h("li", { class: "upload-row" }, h("span", {}, file.name), " ", bar, " ", state) };
}

function uploadSection(ctx, refresh) {
  const input = h("input", { type: "file", multiple: true, id: "upload-files" });
  const tags = h("input", { type: "text", placeholder: "tags, comma-separated", id: "upload-tags" });
  const list = h("ul", { class: "uploads" });
  const out = h("div", {});
  async function send(event) {
    event.preventDefault();
    const rows = [...input.files].map(fileRow);
    clear(list, rows.map((r) => r.row));
    clear(out);
    if (!rows.length) return;
    const form = new FormData();
    rows.forEach((r) => form.append("files", r.file, r.file.name));
    const tagList = splitList(tags.value);
    form.append("request", JSON.stringify({ files_metadata: rows.map(() => (tagList.length ? { tags: tagList } : {})) }));
    try {
      const { operation_ids: ids } = await upload(`${bankPath(ctx.bankId)}/files/retain`, form);
      await Promise.all(ids.map((id, i) => waitForOperation(ctx.bankId, id, (status) => {
        const progress = status.progress || {};
        rows[i].bar.max = progress.total || 1;
        rows[i].bar.value = status.status === "completed" ? rows[i].bar.max : progress.processed || 0;
        clear(rows[i].state, status.status === "failed" ? h("span", { class: "error-cell" }, status.error_message)
          : status.status === "completed" ? "done" : progress.stage || status.status);
        rows[i].row.dataset.status = status.status;
      }, ctx.alive)));
      if (ctx.alive()) refresh();
    } catch (error) {
      clear(out, errorBox(error));
    }
  }
  return section(
    "Upload files",
    h("p", { class: "muted small" }, "PDF, DOCX, PPTX, XLSX, HTML, Markdown, text, CSV or JSON; up to 10 files, 100 MB."),
    h("form", { class: "row", onsubmit: send, id: "upload-form" }, input, tags, h("button", { type: "submit" }, "Upload")),
    list,
    out,
  );
}

export async function renderDocuments(ctx) {
  const listing = h("div", { id: "document-list" });
  async function refresh() {
    const page = await api("GET", `${bankPath(ctx.bankId)}/documents`, { query: { limit: 200 } });
    if (!ctx.alive()) return;
    clear(listing, page.items.length === 0 ? h("p", { class: "muted" }, "No documents yet.") : h(
      "table",
      { class: "grid" },
      h("thead", {}, h("tr", {}, ["document", "tags", "facts", "characters", "updated"].map((t) => h("th", {}, t)))),
      h("tbody", {}, page.items.map((doc) => h(
        "tr",
        {},
        h("td", {}, h("a", { href: bankHref(ctx.bankId, `documents/${encodeURIComponent(doc.id)}`) }, doc.id)),
        h("td", {}, tagChips(doc.tags)),
        h("td", {}, String(doc.memory_unit_count)),
        h("td", {}, String(doc.text_length)),
        h("td", {}, fmtDate(doc.updated_at)),
      ))),
    ));
  }
  await refresh();
  if (!ctx.alive()) return;
  clear(ctx.main, h("h1", {}, "Documents"), uploadSection(ctx, refresh), section("Documents", listing), transferSection(ctx));
}

async function attachmentView(attachment) {
  const label = `${attachment.filename || attachment.kind} · ${attachment.media_type} · ${attachment.byte_size} bytes`;
  const holder = h("figure", { class: "attachment", "data-kind": attachment.kind }, h("figcaption", {}, label));
  try {
    const blob = await fetchBlob(attachment.url);
    const href = URL.createObjectURL(blob);
    holder.prepend(attachment.media_type.startsWith("image/")
      ? h("img", { src: href, alt: label, class: "attachment-image" })
      : h("a", { href, download: attachment.filename || "attachment", class: "button-link" }, "Download"));
  } catch (error) {
    holder.append(errorBox(error));
  }
  return holder;
}

function tagEditor(ctx, doc, reload) {
  const input = h("input", { type: "text", value: (doc.tags || []).join(", "), id: "document-tags" });
  const out = h("div", {});
  async function save(event) {
    event.preventDefault();
    try {
      const answer = await api("PATCH", `${bankPath(ctx.bankId)}/documents/${encodeURIComponent(doc.id)}`,
        { body: { tags: splitList(input.value) } });
      clear(out, notice(`Saved: ${answer.facts_updated} facts retagged`));
      reload();
    } catch (error) {
      clear(out, errorBox(error));
    }
  }
  return h("form", { class: "row", onsubmit: save, id: "tag-form" }, input, h("button", { type: "submit" }, "Save tags"), out);
}

export async function renderDocument(ctx) {
  const base = `${bankPath(ctx.bankId)}/documents/${encodeURIComponent(ctx.id)}`;
  const [doc, history] = await Promise.all([api("GET", base), api("GET", `${base}/history`)]);
  if (!ctx.alive()) return;
  const reload = () => renderDocument(ctx);
  const out = h("div", {});
  async function reprocess() {
    try {
      const { operation_id: id } = await api("POST", `${base}/reprocess`);
      clear(out, notice("Reprocessing…"));
      const status = await waitForOperation(ctx.bankId, id, () => {}, ctx.alive);
      if (ctx.alive()) clear(out, status.status === "completed" ? notice("Reprocessed") : errorBox(new Error(status.error_message)));
    } catch (error) {
      clear(out, errorBox(error));
    }
  }
  const attachments = await Promise.all((doc.attachments || []).map(attachmentView));
  if (!ctx.alive()) return;
  clear(
    ctx.main,
    h("h1", {}, doc.id),
    section("Document", facts([
      ["facts", String(doc.memory_unit_count)],
      ["created", fmtDate(doc.created_at)],
      ["updated", fmtDate(doc.updated_at)],
      ["tags", tagEditor(ctx, doc, reload)],
    ]), h("div", { class: "row" }, h("button", { class: "secondary", onclick: reprocess, id: "reprocess" }, "Reprocess"),
      h("a", { class: "button-link", href: bankHref(ctx.bankId, "memories", { document_id: doc.id }) }, "Its memories")), out),
    section("Attachments", attachments.length ? h("div", { class: "attachments" }, attachments) : h("p", { class: "muted" }, "None.")),
    section("Text", h("pre", { class: "chunk" }, doc.original_text || "(not stored)")),
    section("History", h("ul", { class: "history", id: "document-history" }, history.items.map((event) => h(
      "li", {}, h("strong", {}, event.kind), ` ${fmtDate(event.created_at)} · +${event.facts_added} / −${event.facts_removed} facts`,
    )))),
  );
}
