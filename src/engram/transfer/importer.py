"""A transfer archive into a bank: restore (a new bank, whole) or merge (into an existing one, with a
rule for document ids it already has). Facts are re-embedded with Engram's model and their entities
re-resolved by name; temporal and semantic links are rebuilt, causal links come from the archive.
Everything is written in one transaction: an import lands whole or not at all. The documents go a
batch at a time (`import_documents`), the progress counting them."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.consolidate.trigger import after_memory_change
from engram.errors import Conflict, InvalidInput
from engram.store import facts_write as fw
from engram.store import transfer_writes as tw
from engram.store.banks import get_bank, upsert_bank
from engram.store.tx import transaction
from engram.store.writer_locks import hold_bank_writers
from engram.transfer import import_rows as rows
from engram.transfer.archive import LINK_BATCH, Archive, LinksEntry
from engram.transfer.fact_places import FactPlaces
from engram.transfer.import_documents import (
    Written,
    in_batches,
    prepared_batches,
    target_ids,
    write_batch,
)

if TYPE_CHECKING:
    from engram.services import Services

Progress = Callable[[str, int, int], Awaitable[None]]
MODES = ("restore", "merge")
CONFLICTS = ("skip", "replace", "new-id")
# Facts whose temporal and semantic links are rebuilt per statement (an archive without links.json,
# such as Hindsight's, or a merge): ~1.8 ms a fact through the vector index at 100,000, so all of a
# ~170,000-fact archive in one statement would meet the 300 s command timeout.
LINK_REBUILD_BATCH = 10_000
OBSERVATION_BATCH = 1_000  # observations embedded and inserted per step


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


@dataclass
class _Observations:
    rows: list[tw.ObservationRow] = field(default_factory=list)
    history: list[tuple] = field(default_factory=list)
    dropped: int = 0


@dataclass
class ObservationCounts:
    imported: int = 0
    dropped: int = 0


def _observations(observations: list[dict[str, Any]], places: FactPlaces) -> _Observations:
    """The observations whose sources arrived, embedded (run on a thread)."""
    from engram.models.embedder import embedder
    from engram.models.tokens import count_tokens_batch

    kept, history, dropped = rows.observation_rows(observations, places)
    if kept:
        texts = [o.text for o in kept]
        for obs, vector, tokens in zip(kept, embedder().embed(texts), count_tokens_batch(texts), strict=True):
            obs.vector, obs.token_count = vector, tokens
    return _Observations(kept, history, dropped)


async def _write_observations(
    conn: Any, bank_id: str, archive: Archive, places: FactPlaces, progress: Progress | None, total: int,
) -> ObservationCounts:
    """The observations OBSERVATION_BATCH at a time: made into rows and embedded on a thread, then
    inserted with their history; a progress step after each batch, on from the documents'. All at
    once, 50,000 observations took the server to 1.4 GB, held every request for 5.7 s and left the
    progress standing for three minutes."""
    counts = ObservationCounts()
    for number, batch in enumerate(in_batches(archive.observations, OBSERVATION_BATCH), 1):
        part = await asyncio.to_thread(_observations, batch, places)
        await tw.insert_observations(conn, bank_id, part.rows)
        await tw.insert_observation_history(conn, bank_id, part.history)
        counts.imported += len(part.rows)
        counts.dropped += part.dropped
        if progress is not None:
            await progress("importing", min(len(archive.documents) + number, total - 1), total)
    return counts


async def _merge_targets(
    services: Services, archive: Archive, options: ImportOptions
) -> tuple[dict[str, str | None], set[str]]:
    """A merge's target id for each archived document (None: skipped) from the ids the bank has
    already, and the targets whose stored document it replaces. The documents are read once more for
    their ids, on a thread."""
    ids = await asyncio.to_thread(lambda: [doc["id"] for doc in archive.documents])
    existing = {
        r["id"] for r in await services.pool.fetch(
            "SELECT id FROM documents WHERE bank_id = $1 AND id = ANY($2::text[])", options.target_bank_id, ids)
    }
    mapping = target_ids(ids, existing, options.document_conflict)
    replaced = set()
    if options.document_conflict == "replace":
        replaced = {target for source, target in mapping.items() if target is not None and source in existing}
    return mapping, replaced


def _summary(archive: Archive, options: ImportOptions, written: Written, observations: ObservationCounts,
             models: list[Any], dropped: list[str]) -> dict[str, Any]:
    return {
        "bank_id": options.target_bank_id, "source_bank_id": archive.source_bank_id, "mode": options.mode,
        "documents_imported": written.documents, "documents_skipped": written.skipped,
        "documents_replaced": written.replaced, "facts_imported": written.facts, "chunks_imported": written.chunks,
        "observations_imported": observations.imported, "observations_dropped": observations.dropped,
        "mental_models_imported": len(models),
        "directives_imported": len(rows.directives(archive)) if options.include_bank_config else 0,
        "attachments_imported": written.attachments,
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
    with_config = options.include_bank_config
    config, dropped_config = rows.bank_config(archive) if with_config else ({}, [])
    models = rows.mental_models(archive) if with_config else []
    model_vectors = await asyncio.to_thread(rows.embed_models, models)
    # a restore creates the bank: every document keeps its id
    merge = options.mode != "restore" and options.include_data
    mapping, replace = await _merge_targets(services, archive, options) if merge else (None, set())
    # a step a document (reported once a batch), then (after the links) one a batch of observations, and the rest
    total = (len(archive.documents) + math.ceil(len(archive.observations) / OBSERVATION_BATCH)
             if options.include_data else 0) + 1
    written = Written()
    async with transaction(services.pool) as conn:
        # first, before the bank's row: the retains in flight finish, the next ones wait for this one
        await hold_bank_writers(conn, bank_id)
        profile = rows.bank_profile(archive) if with_config else {}
        await upsert_bank(conn, bank_id, name=profile.get("name"), mission=profile.get("mission"),
                          background=profile.get("background"), config_updates=config)
        observations = ObservationCounts()
        if options.include_data:
            await _write_data(conn, bank_id, archive, options, mapping, replace, written, progress, total)
            observations = await _write_observations(conn, bank_id, archive, written.places, progress, total)
        for model, vector in zip(models, model_vectors):
            await tw.insert_mental_model(conn, bank_id, model, vector)
        if with_config:
            await tw.insert_mental_model_history(conn, bank_id, rows.mental_model_history(archive))
            for directive in rows.directives(archive):
                await tw.insert_directive(conn, bank_id, directive)
    if progress is not None:
        await progress("importing", total, total)
    await after_memory_change(services, bank_id)
    return _summary(archive, options, written, observations, models, dropped_config)


async def _write_data(
    conn: Any, bank_id: str, archive: Archive, options: ImportOptions, mapping: dict[str, str | None] | None,
    replace: set[str], written: Written, progress: Progress | None, total: int,
) -> None:
    """The documents a batch at a time (`mapping` None: each keeps its id), then the links between
    their facts."""
    attachments = rows.attachments_by_document(archive)
    if progress is not None:
        await progress("importing", 0, total)
    async for batch in prepared_batches(archive.documents, mapping):
        await write_batch(conn, bank_id, batch, attachments, replace, written)
        if progress is not None:
            await progress("importing", written.documents + written.skipped, total)
    if archive.links is not None and options.mode == "restore":  # a merge links to what the bank has
        await _restore_links(conn, bank_id, archive, written.places)
        return
    # every fact is in: linking them a batch at a time makes the same links
    for facts in written.places.batches(LINK_REBUILD_BATCH):
        await fw.insert_temporal_links(conn, bank_id, facts)
        await fw.insert_semantic_links(conn, bank_id, facts)


async def _restore_links(conn: Any, bank_id: str, archive: Archive, places: FactPlaces) -> None:
    """The archive's links, LINK_BATCH at a time: read (parsed on a thread), mapped and inserted."""
    source = archive.links
    batches = source.batches(LINK_BATCH) if isinstance(source, LinksEntry) else in_batches(source or [], LINK_BATCH)
    while batch := await asyncio.to_thread(next, batches, None):
        await tw.insert_links(conn, bank_id, await asyncio.to_thread(rows.link_rows, batch, places))
