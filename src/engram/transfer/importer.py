"""A transfer archive into a bank: restore (a new bank, whole) or merge (into an existing one, with a
rule for document ids it already has). Facts are re-embedded with Engram's model and their entities
re-resolved by name; temporal and semantic links are rebuilt, causal links come from the archive.
Everything is written in one transaction: an import lands whole or not at all."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.consolidate.trigger import after_memory_change
from engram.errors import Conflict, InvalidInput
from engram.retain.entities import Mention, store_entities
from engram.retain.facts import embedding_text
from engram.retain.fresh_documents import lock_documents
from engram.store import attachments as attachment_store
from engram.store import facts_write as fw
from engram.store import transfer_writes as tw
from engram.store.banks import get_bank, upsert_bank
from engram.store.memories import delete_units_where
from engram.store.tx import transaction
from engram.transfer import import_rows as rows
from engram.transfer.archive import LINK_BATCH, Archive, LinksEntry

if TYPE_CHECKING:
    from engram.services import Services

Progress = Callable[[str, int, int], Awaitable[None]]
MODES = ("restore", "merge")
CONFLICTS = ("skip", "replace", "new-id")


@dataclass
class ImportOptions:
    target_bank_id: str
    mode: str = "restore"
    document_conflict: str = "skip"
    include_data: bool = True
    include_bank_config: bool = True

    def check(self) -> None:
        if self.mode not in MODES:
            raise InvalidInput("mode", f"must be one of {', '.join(MODES)}")
        if self.document_conflict not in CONFLICTS:
            raise InvalidInput("document_conflict", f"must be one of {', '.join(CONFLICTS)}")
        if not self.target_bank_id.strip():
            raise InvalidInput("target_bank_id", "must not be empty")


# Facts inserted per statement: all of a 100,000-fact archive in one took ~100 s (each enters the
# vector index), so ~300,000 would meet the 300 s command timeout.
FACT_BATCH = 10_000
DOCUMENT_BATCH = 1_000


@dataclass
class _Plan:
    documents: list[rows.DocumentRows] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    observations: list[tw.ObservationRow] = field(default_factory=list)
    # Where each archived fact landed, to restore the archive's links onto; None: rebuild the temporal
    # and semantic links instead.
    fact_positions: dict[tuple[str, int], uuid.UUID] | None = None
    history: list[tuple] = field(default_factory=list)
    dropped_observations: int = 0


async def _document_ids(
    services: Services, options: ImportOptions, archive: Archive
) -> tuple[dict[str, str | None], set[str]]:
    """Each archived document's id in the target bank (None: skipped), and the ids the bank has already."""
    existing = {
        r["id"] for r in await services.pool.fetch(
            "SELECT id FROM documents WHERE bank_id = $1 AND id = ANY($2::text[])",
            options.target_bank_id, [d["id"] for d in archive.documents])
    }
    mapping: dict[str, str | None] = {}
    for doc in archive.documents:
        source = doc["id"]
        if source not in existing or options.document_conflict == "replace":
            mapping[source] = source
        elif options.document_conflict == "new-id":
            mapping[source] = f"{source}-{uuid.uuid4().hex[:8]}"
        else:
            mapping[source] = None
    return mapping, existing


def _embed_all(plan: _Plan) -> None:
    from engram.models.embedder import embedder
    from engram.models.tokens import count_tokens_batch

    units = [u for d in plan.documents for u in d.units]
    texts = [embedding_text(u.row.text, u.row.occurred_start or u.row.mentioned_at, u.names) for u in units]
    texts += [o.text for o in plan.observations]
    vectors = embedder().embed(texts) if texts else []
    counts = count_tokens_batch([u.row.text for u in units] + [o.text for o in plan.observations]) if texts else []
    for unit, vector, tokens in zip(units, vectors, counts):
        unit.row.embedding, unit.row.token_count = vector, tokens
    for obs, vector, tokens in zip(plan.observations, vectors[len(units):], counts[len(units):]):
        obs.vector, obs.token_count = vector, tokens


async def _plan_data(services: Services, archive: Archive, options: ImportOptions) -> _Plan:
    """Which documents arrive under which id, their rows, and the observations that still have sources."""
    plan = _Plan()
    if not options.include_data:
        return plan
    mapping, existing = await _document_ids(services, options, archive)
    plan.skipped = [source for source, target in mapping.items() if target is None]
    if options.document_conflict == "replace":
        plan.replaced = [target for source, target in mapping.items() if target and source in existing]
    plan.documents = [rows.document_rows(doc, mapping[doc["id"]]) for doc in archive.documents if mapping[doc["id"]]]
    positions = {(d.source_id, i): u.row.id for d in plan.documents for i, u in enumerate(d.units)}
    plan.observations, plan.history, plan.dropped_observations = rows.observation_rows(archive.observations, positions)
    if archive.links is not None and options.mode == "restore":  # a merge links to what the bank has
        plan.fact_positions = positions
    return plan


async def _embed(plan: _Plan, progress: Progress | None) -> None:
    total = sum(len(d.units) for d in plan.documents) + len(plan.observations)
    if progress:
        await progress("embedding", 0, total)
    await asyncio.to_thread(_embed_all, plan)
    if progress:
        await progress("embedding", total, total)


def _summary(archive: Archive, options: ImportOptions, plan: _Plan, models: list[Any], dropped: list[str]
             ) -> dict[str, Any]:
    return {
        "bank_id": options.target_bank_id, "source_bank_id": archive.source_bank_id, "mode": options.mode,
        "documents_imported": len(plan.documents), "documents_skipped": len(plan.skipped),
        "documents_replaced": len(plan.replaced),
        "facts_imported": sum(len(d.units) for d in plan.documents),
        "chunks_imported": sum(len(d.chunks) for d in plan.documents),
        "observations_imported": len(plan.observations), "observations_dropped": plan.dropped_observations,
        "mental_models_imported": len(models),
        "directives_imported": len(rows.directives(archive)) if options.include_bank_config else 0,
        "attachments_imported": sum(len(d.attachments) for d in plan.documents),
        "config_keys_dropped": dropped,
    }


async def import_archive(
    services: Services, archive: Archive, options: ImportOptions, progress: Progress | None = None
) -> dict[str, Any]:
    options.check()
    bank_id = options.target_bank_id
    exists = await get_bank(services.pool, bank_id) is not None
    if options.mode == "restore" and exists:
        raise Conflict(f"bank '{bank_id}' already exists: a restore creates a new bank (use mode=merge to add to it)")
    plan = await _plan_data(services, archive, options)
    await _embed(plan, progress)
    with_config = options.include_bank_config
    config, dropped_config = rows.bank_config(archive) if with_config else ({}, [])
    models = rows.mental_models(archive) if with_config else []
    model_vectors = await asyncio.to_thread(rows.embed_models, models)
    if progress:
        await progress("writing", 0, len(plan.documents))
    async with transaction(services.pool) as conn:
        profile = rows.bank_profile(archive) if with_config else {}
        await upsert_bank(conn, bank_id, name=profile.get("name"), mission=profile.get("mission"),
                          background=profile.get("background"), config_updates=config)
        await _write_documents(conn, bank_id, plan, archive, lock=options.mode != "restore")
        await tw.insert_observations(conn, bank_id, plan.observations)
        await tw.insert_observation_history(conn, bank_id, plan.history)
        for model, vector in zip(models, model_vectors):
            await tw.insert_mental_model(conn, bank_id, model, vector)
        if with_config:
            await tw.insert_mental_model_history(conn, bank_id, rows.mental_model_history(archive))
            for directive in rows.directives(archive):
                await tw.insert_directive(conn, bank_id, directive)
    await after_memory_change(services, bank_id)
    return _summary(archive, options, plan, models, dropped_config)


def _document_metadata(source: dict[str, Any]) -> Any:
    """An Engram archive's own `metadata` key, else where Hindsight keeps it: `retain_params.metadata`."""
    if "metadata" in source:
        return source["metadata"]
    return (source.get("retain_params") or {}).get("metadata")


def _document_row(doc: rows.DocumentRows) -> dict[str, Any]:
    """The document's row for `facts_write.upsert_documents`."""
    text = doc.source.get("original_text")
    return {
        "id": doc.document_id, "original_text": text, "content_hash": hashlib.sha256((text or "").encode()).hexdigest(),
        "tags": list(doc.source.get("tags") or []), "metadata": _document_metadata(doc.source),
        "retain_params": doc.source.get("engram_retain_params", doc.source.get("retain_params")),
        "observation_scopes": doc.source.get("observation_scopes"),
    }


async def _restore_links(
    conn: Any, bank_id: str, archive: Archive, positions: dict[tuple[str, int], uuid.UUID]
) -> None:
    """The archive's links, LINK_BATCH at a time: read (parsed on a thread), mapped and inserted."""
    source = archive.links
    if isinstance(source, LinksEntry):
        batches = source.batches(LINK_BATCH)
    else:
        links = source or []
        batches = iter([links[i:i + LINK_BATCH] for i in range(0, len(links), LINK_BATCH)])
    while batch := await asyncio.to_thread(next, batches, None):
        await tw.insert_links(conn, bank_id, rows.link_rows(batch, positions))


async def _write_documents(conn: Any, bank_id: str, plan: _Plan, archive: Archive, *, lock: bool) -> None:
    """`lock`: take each document's writer lock, as a retain does (a merge into a bank others write to).
    A restore creates its bank and is its only writer; its documents' locks, one per document in one
    transaction, filled PostgreSQL's lock table at ~10,000 documents ("out of shared memory").
    Documents go DOCUMENT_BATCH at a time, a statement per table: one by one, a 100,000-document
    archive took 400,000 statements."""
    attachments = rows.attachments_by_document(archive)
    if lock:  # all of them first, in sorted order as retains take theirs: no deadlock between the two
        ordered = sorted({doc.document_id for doc in plan.documents})
        for start in range(0, len(ordered), DOCUMENT_BATCH):
            await lock_documents(conn, bank_id, ordered[start:start + DOCUMENT_BATCH])
    to_replace = set(plan.replaced)
    for start in range(0, len(plan.documents), DOCUMENT_BATCH):
        batch = plan.documents[start:start + DOCUMENT_BATCH]
        if replaced := [doc.document_id for doc in batch if doc.document_id in to_replace]:
            await delete_units_where(conn, "m.bank_id = $1 AND m.document_id = ANY($2::text[])", bank_id, replaced)
            await conn.execute("DELETE FROM documents WHERE bank_id = $1 AND id = ANY($2::text[])", bank_id, replaced)
        # one row per id (an archive naming a document twice: the later one's row, as when upserted in turn)
        await fw.upsert_documents(conn, bank_id, list({doc.document_id: _document_row(doc) for doc in batch}.values()))
        await tw.set_documents_created(conn, bank_id, [
            (doc.document_id, created) for doc in batch if (created := rows.when(doc.source.get("created_at")))])
        await fw.insert_chunks_of_documents(conn, bank_id, [
            (chunk_id, doc.document_id, index, text, digest) for doc in batch
            for chunk_id, index, text, digest in doc.chunks])
        for doc in batch:
            doc.attachments = rows.attachment_rows(attachments.get(doc.source_id, []), doc)
        await attachment_store.insert(conn, bank_id, [a for doc in batch for a in doc.attachments])
    units = [u for d in plan.documents for u in d.units]
    for start in range(0, len(units), FACT_BATCH):
        batch = units[start:start + FACT_BATCH]
        await fw.insert_units(conn, bank_id, [u.row for u in batch])
        await tw.set_unit_lifecycle(conn, [u.lifecycle for u in batch])
        await store_entities(conn, bank_id, [Mention(u.row.id, u.names, False, u.labels) for u in batch])
    await fw.insert_causal_links(conn, bank_id, [pair for d in plan.documents for pair in d.causal])
    if plan.fact_positions is not None:
        await _restore_links(conn, bank_id, archive, plan.fact_positions)
        return
    ids = [u.row.id for u in units]
    await fw.insert_temporal_links(conn, bank_id, ids)
    await fw.insert_semantic_links(conn, bank_id, ids)

