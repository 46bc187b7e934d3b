// One memory: its text, type, dates, tags and entities, the chunk it came from, and for an
// observation the evidence it rests on (quotes from its source facts), its proof count and history.

import { api, bankPath } from "../api.js";
import { consolidationStatus, settingHref } from "../consolidation.js";
import { badge, clear, errorBox, facts, fmtDate, h, section, shortId, tagChips } from "../dom.js";
import { bankHref } from "../links.js";
import { editSection } from "./memory_edit.js";

const MAX_SOURCES = 30;

function entityChips(ctx, names) {
  if (!names || !names.length) return h("span", { class: "muted" }, "none");
  return h(
    "div",
    { class: "chips entities" },
    names.map((name) => h("a", { class: "chip entity", href: bankHref(ctx.bankId, "entities", { q: name }) }, name)),
  );
}

function consolidationState(ctx, memory, status) {
  if (memory.fact_type === "observation") return null;
  if (memory.consolidated_at) return `consolidated ${fmtDate(memory.consolidated_at)}`;
  if (memory.consolidation_failed_at) return `failed ${fmtDate(memory.consolidation_failed_at)}: ${memory.consolidation_error || ""}`;
  if (!status.enabled) {
    return h(
      "span",
      { class: "consolidation-off" },
      `off (${status.reason}) · `,
      h("a", { href: settingHref(ctx.bankId, status) }, `set ${status.setting}`),
    );
  }
  return "awaiting consolidation";
}

async function chunkSection(ctx, memory) {
  if (!memory.chunk_id) return section("Source chunk", h("p", { class: "muted" }, "No chunk (not retained from text)."));
  try {
    const chunk = await api("GET", `/chunks/${encodeURIComponent(memory.chunk_id)}`);
    return section(
      "Source chunk",
      h(
        "p",
        { class: "muted small" },
        `chunk ${chunk.chunk_index} of document `,
        h("code", {}, chunk.document_id || "?"),
      ),
      h("pre", { class: "chunk" }, chunk.chunk_text),
    );
  } catch (error) {
    return section("Source chunk", errorBox(error));
  }
}

async function evidenceSection(ctx, memory) {
  const base = bankPath(ctx.bankId);
  const sourceIds = [...new Set([...(memory.evidence || []).map((e) => e.fact_id), ...memory.source_memory_ids])];
  const sources = new Map();
  await Promise.all(
    sourceIds.slice(0, MAX_SOURCES).map((id) =>
      api("GET", `${base}/memories/${id}`)
        .then((fact) => sources.set(id, fact))
        .catch(() => sources.set(id, null)),
    ),
  );
  const byFact = new Map();
  for (const item of memory.evidence || []) {
    if (!byFact.has(item.fact_id)) byFact.set(item.fact_id, []);
    byFact.get(item.fact_id).push(item.quote);
  }
  const items = sourceIds.map((id) => {
    const fact = sources.get(id);
    const quotes = byFact.get(id) || [];
    return h(
      "li",
      { class: "evidence-item" },
      quotes.map((quote) => h("blockquote", { class: "quote" }, `“${quote}”`)),
      h(
        "div",
        { class: "small" },
        "from ",
        h("a", { href: bankHref(ctx.bankId, `memories/${id}`) }, fact ? fact.text : `memory ${shortId(id)} (deleted)`),
        fact ? h("span", { class: "muted" }, ` · ${fmtDate(fact.mentioned_at || fact.created_at)}`) : null,
      ),
    );
  });
  return section(
    "Evidence",
    h(
      "p",
      {},
      h("span", { class: "proof-count" }, `Proof count: ${memory.proof_count}`),
      h("span", { class: "muted" }, ` · ${sourceIds.length} source fact${sourceIds.length === 1 ? "" : "s"}`),
    ),
    items.length ? h("ol", { class: "evidence" }, items) : h("p", { class: "muted" }, "No evidence recorded."),
  );
}

async function historySection(ctx, memory) {
  const history = await api("GET", `${bankPath(ctx.bankId)}/memories/${memory.id}/history`);
  const versions = history.history.map((version) =>
    h(
      "li",
      { class: "history-item" },
      h("div", { class: "muted small" }, `${fmtDate(version.changed_at)}${version.reason ? ` · ${version.reason}` : ""}`),
      h("div", { class: "history-text" }, version.text),
      h("div", { class: "muted small" }, `${version.source_memory_ids.length} sources`),
    ),
  );
  return section(
    `History (${versions.length} earlier version${versions.length === 1 ? "" : "s"})`,
    h("p", { class: "small" }, h("strong", {}, "Now: "), history.current.text),
    versions.length ? h("ol", { class: "history" }, versions) : h("p", { class: "muted" }, "Never rewritten."),
  );
}

export async function renderMemory(ctx) {
  const [memory, status] = await Promise.all([
    api("GET", `${bankPath(ctx.bankId)}/memories/${encodeURIComponent(ctx.id)}`),
    consolidationStatus(ctx.bankId),
  ]);
  if (!ctx.alive()) return;
  const isObservation = memory.fact_type === "observation";
  const details = section(
    null,
    h("div", { class: "memory-head" }, badge(memory.fact_type), memory.fact_kind ? badge(memory.fact_kind, "kind") : null),
    h("p", { class: "memory-text" }, memory.text),
    facts([
      ["Id", h("code", {}, memory.id)],
      ["Occurred", memory.occurred_start ? `${fmtDate(memory.occurred_start)} → ${fmtDate(memory.occurred_end)}` : ""],
      ["Mentioned", fmtDate(memory.mentioned_at)],
      ["Created", fmtDate(memory.created_at)],
      ["Updated", fmtDate(memory.updated_at)],
      ["Document", memory.document_id ? h("code", {}, memory.document_id) : ""],
      ["Context", memory.context],
      ["Tags", tagChips(memory.tags)],
      ["Entities", entityChips(ctx, memory.entities)],
      ["Consolidation", consolidationState(ctx, memory, status)],
      ["Scopes", memory.observation_scopes ? JSON.stringify(memory.observation_scopes) : ""],
      ["Metadata", Object.keys(memory.metadata || {}).length ? JSON.stringify(memory.metadata) : ""],
    ]),
  );
  clear(ctx.main, h("h1", {}, isObservation ? "Observation" : "Memory"), details, h("p", { class: "muted" }, "Loading…"));
  const extra = isObservation
    ? await Promise.all([evidenceSection(ctx, memory), historySection(ctx, memory).catch(errorBox)])
    : [await chunkSection(ctx, memory)];
  if (!ctx.alive()) return;
  const edit = isObservation ? null : editSection(ctx, memory, () => renderMemory(ctx));
  clear(ctx.main, h("h1", {}, isObservation ? "Observation" : "Memory"), details, edit, extra);
}
