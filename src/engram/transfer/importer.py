"""A transfer archive into a bank: restore (a new bank, whole) or merge (into an existing one, with a
rule for document ids it already has). Facts are re-embedded with Engram's model and their entities
re-resolved by name; temporal and semantic links are rebuilt, causal links come from the archive.
Everything is written in one transaction: an import lands whole or not at all. The documents go a
batch at a time (`import_documents`), the progress counting them."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.consolidate.trigger import after_memory_change
from engram.errors import Conflict, InvalidInput
from engram.store import facts_write as fw
from engram.store import transfer_writes as tw
from engram.store.banks import get_bank, upsert_bank
from engram.store.statistics import analyze_if_bank_undercounted
from engram.store.tx import transaction
from engram.store.writer_locks import Claim, hold_bank_writers
from engram.transfer import import_rows as rows
from engram.transfer.archive import LINK_BATCH, Archive, ArrayEntry
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


@dataclass
class Steps:
    """An import's progress: a step a document (reported once a batch), a step a batch of links
    (restored, or rebuilt), a step a batch of observations, and one for the rest. The counts come
    before anything is written (the links' and facts' from the manifest, the observations' counted
    when the archive was read), so the total stays; what is reported is never past the last step
    but one until the import has committed."""
    report: Progress | None
    documents: int = 0
    link_batches: int = 0
    observation_batches: int = 0

    @property
    def total(self) -> int:
        return self.documents + self.link_batches + self.observation_batches + 1

    async def at(self, done: int) -> None:
        if self.report is not None:
            await self.report("importing", min(done, self.total - 1), self.total)

    async def links_at(self, batches: int) -> None:
        await self.at(self.documents + min(batches, self.link_batches))

    async def observations_at(self, batches: int) -> None:
        await self.at(self.documents + self.link_batches + min(batches, self.observation_batches))

    async def done(self) -> None:
        if self.report is not None:
            await self.report("importing", self.total, self.total)


def _observations(batches: Iterator[list[dict[str, Any]]], places: FactPlaces) -> _Observations | None:
    """The next batch of observations, read from the archive, those whose sources arrived made rows and
    embedded (run on a thread); None after the last."""
    from engram.models.embedder import embedder
    from engram.models.tokens import count_tokens_batch

    batch = next(batches, None)
    if batch is None:
        return None
    kept, history, dropped = rows.observation_rows(batch, places)
    if kept:
        texts = [o.text for o in kept]
        for obs, vector, tokens in zip(kept, embedder().embed(texts), count_tokens_batch(texts), strict=True):
            obs.vector, obs.token_count = vector, tokens
    return _Observations(kept, history, dropped)


async def _write_observations(
    conn: Any, bank_id: str, archive: Archive, places: FactPlaces, steps: Steps
) -> ObservationCounts:
    """The observations OBSERVATION_BATCH at a time: read, made into rows and embedded on a thread,
    then inserted with their history; a progress step after each batch, on from the documents'. All
    at once, 50,000 observations took the server to 1.4 GB, held every request for 5.7 s and left the
    progress standing for three minutes."""
    counts = ObservationCounts()
    batches = _batches(archive.observations, OBSERVATION_BATCH)
    number = 0
    while (part := await asyncio.to_thread(_observations, batches, places)) is not None:
        number += 1
        await tw.insert_observations(conn, bank_id, part.rows)
        await tw.insert_observation_history(conn, bank_id, part.history)
        counts.imported += len(part.rows)
        counts.dropped += part.dropped
        await steps.observations_at(number)
    return counts


def _batches(items: ArrayEntry | list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """An archive's links or observations in lists of `size`: read from the archive as they are taken,
    or sliced from a list."""
    return items.batches(size) if isinstance(items, ArrayEntry) else in_batches(items, size)


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
    services: Services, archive: Archive, options: ImportOptions, progress: Progress | None = None,
    claim: Claim | None = None,
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
    steps = Steps(progress)
    if options.include_data:
        steps.documents = len(archive.documents)
        steps.link_batches = await _link_batches(archive, options)
        steps.observation_batches = math.ceil(len(archive.observations) / OBSERVATION_BATCH)
    written = Written()
    async with transaction(services.pool) as conn:
        # first, before the bank's row: the retains in flight finish, the next ones wait for this one
        await hold_bank_writers(conn, bank_id, claim)
        profile = rows.bank_profile(archive) if with_config else {}
        await upsert_bank(conn, bank_id, name=profile.get("name"), mission=profile.get("mission"),
                          background=profile.get("background"), config_updates=config)
        observations = ObservationCounts()
        if options.include_data:
            await _write_data(conn, bank_id, archive, options, mapping, replace, written, steps)
            observations = await _write_observations(conn, bank_id, archive, written.places, steps)
        for model, vector in zip(models, model_vectors):
            await tw.insert_mental_model(conn, bank_id, model, vector)
        if with_config:
            await tw.insert_mental_model_history(conn, bank_id, rows.mental_model_history(archive))
            for directive in rows.directives(archive):
                await tw.insert_directive(conn, bank_id, directive)
    await steps.done()
    if options.include_data:  # a bank the statistics do not know is planned as nearly empty
        await analyze_if_bank_undercounted(services.pool, bank_id)
    await after_memory_change(services, bank_id)
    return _summary(archive, options, written, observations, models, dropped_config)


async def _write_data(
    conn: Any, bank_id: str, archive: Archive, options: ImportOptions, mapping: dict[str, str | None] | None,
    replace: set[str], written: Written, steps: Steps,
) -> None:
    """The documents a batch at a time (`mapping` None: each keeps its id), then the links between
    their facts."""
    attachments = rows.attachments_by_document(archive)
    await steps.at(0)
    async for batch in prepared_batches(archive.documents, mapping):
        await write_batch(conn, bank_id, batch, attachments, replace, written)
        await steps.at(written.documents + written.skipped)
    if _restores_links(archive, options):
        await _restore_links(conn, bank_id, archive, written.places, steps)
        return
    # every fact is in: linking them a batch at a time makes the same links
    for number, facts in enumerate(written.places.batches(LINK_REBUILD_BATCH), 1):
        await fw.insert_temporal_links(conn, bank_id, facts)
        await fw.insert_semantic_links(conn, bank_id, facts)
        await steps.links_at(number)


def _restores_links(archive: Archive, options: ImportOptions) -> bool:
    """Whether the import restores the archive's links as they were (an Engram archive, restored) or
    rebuilds them (a Hindsight archive, or a merge, which links to what the bank has)."""
    return archive.links is not None and options.mode == "restore"


async def _link_batches(archive: Archive, options: ImportOptions) -> int:
    """The steps the links will take: batches of the archive's links, or of the facts whose links are
    rebuilt, as the manifest counts them (an Engram archive from before `link_count` has its lines
    counted, on a thread: ~3.8 s for 5.15 million)."""
    if not _restores_links(archive, options):
        return math.ceil(max(_manifest_count(archive, "fact_count"), 0) / LINK_REBUILD_BATCH)
    links = _manifest_count(archive, "link_count")
    if links < 0:
        source = archive.links
        links = await asyncio.to_thread(source.count_items) if isinstance(source, ArrayEntry) else len(source or [])
    return math.ceil(links / LINK_BATCH)


def _manifest_count(archive: Archive, key: str) -> int:
    """A count the manifest gives (-1 when it is missing or not a count)."""
    value = archive.manifest.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1


async def _restore_links(conn: Any, bank_id: str, archive: Archive, places: FactPlaces, steps: Steps) -> None:
    """The archive's links, LINK_BATCH at a time: read (parsed on a thread), mapped and inserted, a
    progress step each."""
    batches = _batches(archive.links or [], LINK_BATCH)
    number = 0
    while batch := await asyncio.to_thread(next, batches, None):
        await tw.insert_links(conn, bank_id, await asyncio.to_thread(rows.link_rows, batch, places))
        number += 1
        await steps.links_at(number)
