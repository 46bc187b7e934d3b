"""Retain: items in, facts stored. Extraction and embedding happen before the transaction; the write
is one transaction, so a retain is stored whole or not at all."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engram import cpu_priority
from engram.errors import DocumentChanged
from engram.give_way import give_way, waited_on
from engram.llm.base import TokenUsage
from engram.llm.call_slots import retain_share
from engram.retain.attachments import images_by_chunk, write_attachments
from engram.retain.chunking import chunk_text
from engram.retain.embedding import EmbeddingStream
from engram.retain.entities import Mention, Reading, read_entities, store_entities
from engram.retain.facts import ExtractedFact
from engram.retain.fresh_documents import all_fresh, record_fresh_events, write_fresh_documents
from engram.retain.label_config import LabelGroup, groups_from_config
from engram.retain.prepare import PreparedItem
from engram.store import document_events, semantic_links
from engram.store import facts_write as fw
from engram.store.statistics import (
    BULK_RETAIN_FACTS,
    analyze_if_stale,
    analyze_soon_if_bank_undercounted,
    publish_write_counts,
)
from engram.store.unit_ids import new_unit_id
from engram.store.write_slots import retain_slots
from engram.store.writer_locks import Claim, lock_documents, writing_to_bank
from engram.together import run_together

if TYPE_CHECKING:
    from engram.services import Services

log = logging.getLogger("engram.retain")

Progress = Callable[[str, int, int], Awaitable[None]]
# What a retain adds to its write's transaction once the facts are written: (connection, facts written).
OnWritten = Callable[[Any, int], Awaitable[Any]]
# Chunks of one retain the offline extractor takes at once (threads running Python: more would only queue
# for the interpreter). With an LLM, a retain takes half of the process's LLM slots (`llm.call_slots`).
OFFLINE_EXTRACTION_CONCURRENCY = 4


@dataclass
class ChunkPlan:
    """A chunk of a document: reused as stored (`reuse_id`) or to be extracted."""

    index: int
    text: str
    content_hash: str
    reuse_id: str | None = None
    chunk_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    facts: list[ExtractedFact] = field(default_factory=list)


@dataclass
class DocumentPlan:
    document_id: str
    items: list[PreparedItem]
    original_text: str
    chunks: list[ChunkPlan]
    keep_chunk_ids: list[str]
    expected_existing: list[str]


@dataclass
class RetainOutcome:
    items_count: int
    unit_ids: list[uuid.UUID]
    usage: TokenUsage


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _plan_document(
    conn: Any, bank_id: str, items: list[PreparedItem], chunk_size: int, existing: list[Any]
) -> DocumentPlan:
    """Which chunks are new (to extract) and which are unchanged since the last retain (reused);
    `existing`: the document's stored chunks."""
    document_id = items[0].document_id
    old_text = await fw.get_document_text(conn, bank_id, document_id) if existing else None
    replace = items[0].update_mode == "replace"
    new_text = "\n\n".join(item.text for item in items)
    texts = chunk_text(new_text, chunk_size)
    chunks: list[ChunkPlan] = []
    if replace:
        unused = {}
        for row in existing:
            unused.setdefault(row["content_hash"], []).append(row["id"])
        for index, text in enumerate(texts):
            digest = content_hash(text)
            reuse = unused.get(digest, []).pop(0) if unused.get(digest) and not items[0].reextract else None
            chunks.append(ChunkPlan(index, text, digest, reuse_id=reuse))
        keep = [c.reuse_id for c in chunks if c.reuse_id]
        original = new_text
    else:
        start = (max(row["chunk_index"] for row in existing) + 1) if existing else 0
        chunks = [ChunkPlan(start + i, t, content_hash(t)) for i, t in enumerate(texts)]
        keep = [row["id"] for row in existing]
        original = f"{old_text}\n\n{new_text}" if old_text else new_text
    return DocumentPlan(document_id, items, original, chunks, keep, [row["id"] for row in existing])


async def _plan_documents(
    services: Services, bank_id: str, groups: list[list[PreparedItem]], chunk_size: int
) -> list[DocumentPlan]:
    """Each document's plan, from what is stored under its id; a document whose id the server made
    for this retain has nothing stored (no round trip when no document has a caller's id)."""
    named = [group[0].document_id for group in groups if not group[0].document_id_made_here]
    if not named:
        return [await _plan_document(None, bank_id, group, chunk_size, []) for group in groups]
    async with services.pool.acquire() as conn:
        stored = await fw.existing_chunks_of(conn, bank_id, named)
        return [await _plan_document(conn, bank_id, group, chunk_size, stored.get(group[0].document_id, []))
                for group in groups]


def chunks_at_once(services: Services) -> int:
    """How many chunks of one retain (or dry run) are extracted at once."""
    if services.llm is None:
        return OFFLINE_EXTRACTION_CONCURRENCY
    return retain_share(services.settings.llm_max_concurrent)


def _group_by_document(items: list[PreparedItem]) -> list[list[PreparedItem]]:
    """Items sharing a document id form one document; after the first, they append to it."""
    groups: dict[str, list[PreparedItem]] = {}
    for item in items:
        groups.setdefault(item.document_id, []).append(item)
    return list(groups.values())


async def _extract(services: Services, plans: list[DocumentPlan], config: dict[str, Any],
                   groups: list[LabelGroup], progress: Progress | None,
                   extracted: Callable[[DocumentPlan, ChunkPlan], None]) -> TokenUsage:
    """Fill each new chunk's facts, with the LLM when one is configured, offline otherwise; `extracted`
    hears of each chunk as soon as its facts are in."""
    todo = [(plan, chunk) for plan in plans for chunk in plan.chunks if chunk.reuse_id is None]
    vision = services.settings.llm_vision and services.llm is not None
    images = {id(plan): images_by_chunk(plan) for plan in plans} if vision else {}
    usage = TokenUsage()
    done = 0
    semaphore = asyncio.Semaphore(chunks_at_once(services))

    async def run(plan: DocumentPlan, chunk: ChunkPlan) -> None:
        nonlocal usage, done
        item = plan.items[0]
        async with semaphore:
            await give_way()
            if services.llm is not None:
                from engram.retain.extraction import extract_with_llm

                chunk.facts, used = await extract_with_llm(
                    services.llm,
                    chunk.text,
                    said_at=item.said_at,
                    context=item.context,
                    mission=config.get("retain_mission"),
                    custom_instructions=config.get("retain_custom_instructions"),
                    label_groups=groups,
                    free_form=bool(config.get("entities_allow_free_form", True)),
                    images=images.get(id(plan), {}).get(plan.chunks.index(chunk)),
                )
                usage = usage + used
            else:
                from engram.retain.offline import extract_offline

                chunk.facts = await cpu_priority.to_thread(extract_offline, chunk.text, said_at=item.said_at)
        extracted(plan, chunk)
        done += 1
        if progress:
            await progress("extracting", done, len(todo))

    await run_together(run(plan, chunk) for plan, chunk in todo)  # a failed chunk stops the rest
    return usage


@dataclass
class PendingUnit:
    row: fw.UnitRow
    fact: ExtractedFact
    entity_names: list[str]
    causes: list[int]  # positions among its chunk's facts until `_assemble`, then in the pending list
    resolve: bool = True  # False: the caller's entities match existing names exactly, never fuzzily
    entity_types: dict[str, str] = field(default_factory=dict)
    sentence_vectors: list[Any] = field(default_factory=list)  # see migration 006


def _chunk_units(plan: DocumentPlan, chunk: ChunkPlan, allow_free_form: bool) -> list[PendingUnit]:
    """The units of one extracted chunk (their causes still counted within the chunk)."""
    item = plan.items[0]
    units = []
    for fact in chunk.facts:
        names = list(dict.fromkeys([*fact.entities, *item.entities])) if allow_free_form else []
        row = fw.UnitRow(
            id=new_unit_id(),
            document_id=plan.document_id,
            chunk_id=chunk.chunk_id,
            text=fact.stored_text(),
            context=item.context,
            fact_type=fact.fact_type,
            fact_kind=fact.fact_kind,
            embedding=None,
            occurred_start=fact.occurred_start,
            occurred_end=fact.occurred_end,
            mentioned_at=item.said_at,
            tags=list(dict.fromkeys([*item.tags, *fact.label_tags])),
            metadata=item.metadata,
            observation_scopes=item.observation_scopes,
            lead_in=fact.lead_in,
        )
        units.append(PendingUnit(row, fact, names, list(fact.causal_parents), item.resolve_entities,
                                 {**fact.entity_types, **item.entity_types}))
    return units


def _assemble(plans: list[DocumentPlan], units: dict[str, list[PendingUnit]]) -> list[PendingUnit]:
    """Every chunk's units in document and chunk order, their causes turned into pending-list positions."""
    pending: list[PendingUnit] = []
    for plan in plans:
        for chunk in plan.chunks:
            base = len(pending)
            for unit in units.get(chunk.chunk_id, []):
                unit.causes = [base + p for p in unit.causes]
                pending.append(unit)
    return pending


def _label_offline(groups: list[LabelGroup], pending: list[PendingUnit]) -> None:
    from engram.models.embedder import embedder
    from engram.retain.labels_offline import classify

    if not pending:
        return
    vectors = np.stack([p.row.embedding for p in pending])
    for p, (labels, tags) in zip(pending, classify(groups, vectors, embedder().embed_queries)):
        p.fact.labels = labels
        p.row.tags = list(dict.fromkeys([*p.row.tags, *tags]))


def _retain_params(item: PreparedItem) -> dict[str, Any]:
    return {"context": item.context, "update_mode": item.update_mode,
            "timestamp": item.said_at.isoformat() if item.said_at else "unset"}


@dataclass
class Extracted:
    """What a retain's extraction produced: every fact, in document and chunk order, and the LLM's usage."""
    pending: list[PendingUnit]
    usage: TokenUsage


def _facts_added(pending: list[PendingUnit]) -> Counter[str]:
    return Counter(p.row.document_id for p in pending)


def _extracted(extraction: Awaitable[Extracted]) -> bool:
    """Whether every fact is extracted (and none failed): their counts are known."""
    return (isinstance(extraction, asyncio.Future) and extraction.done() and not extraction.cancelled()
            and extraction.exception() is None)


async def _write_documents(
    conn: Any, bank_id: str, plans: list[DocumentPlan], extraction: Awaitable[Extracted], store_text: bool
) -> int | None:
    """Each document's row and chunks, and the removal of what its new version drops: new documents
    in one statement (`fresh_documents`), with their history events when their facts are all
    extracted already (returns 0), else the caller writes those once they are (`record_fresh_events`;
    returns None); others one by one, with their events, after the extraction (returns how many facts
    their new versions removed)."""
    plans = sorted(plans, key=lambda p: p.document_id)
    params = {plan.document_id: _retain_params(plan.items[0]) for plan in plans}
    if all_fresh(plans):
        counted = _facts_added(extraction.result().pending) if _extracted(extraction) else None
        if await write_fresh_documents(conn, bank_id, plans, store_text, params, counted):
            return None if counted is None else 0
    added = _facts_added((await extraction).pending)
    removed_facts = 0
    for plan in plans:
        await lock_documents(conn, bank_id, [plan.document_id])
        current = [row["id"] for row in await fw.existing_chunks(conn, bank_id, plan.document_id)]
        if current != plan.expected_existing:
            raise DocumentChanged(plan.document_id)
        item = plan.items[0]
        await fw.upsert_document(
            conn, bank_id, plan.document_id,
            original_text=plan.original_text if store_text else None,
            content_hash=content_hash(plan.original_text),
            tags=item.tags,
            metadata=item.metadata or None,
            retain_params=params[plan.document_id],
            observation_scopes=item.observation_scopes,
        )
        removed = await fw.delete_document_units_except(conn, bank_id, plan.document_id, plan.keep_chunk_ids)
        removed_facts += len(removed)
        kind = "append" if item.update_mode == "append" and plan.expected_existing else item.history_kind
        await document_events.record(conn, bank_id, plan.document_id, kind, operation_id=item.operation_id,
                                     facts_added=added[plan.document_id], facts_removed=len(removed))
        reused = [c for c in plan.chunks if c.reuse_id]
        if reused:
            await fw.reindex_chunks(conn, [c.reuse_id for c in reused], [c.index for c in reused])
        new_chunks = [(c.chunk_id, c.index, c.text, c.content_hash) for c in plan.chunks if not c.reuse_id]
        await fw.insert_chunks(conn, bank_id, plan.document_id, new_chunks)
        await write_attachments(conn, bank_id, plan)
    return removed_facts


def _mentions(pending: list[PendingUnit]) -> list[Mention]:
    return [Mention(p.row.id, p.entity_names, p.resolve, p.fact.labels, p.entity_types) for p in pending]


def _chars(plans: list[DocumentPlan]) -> int:
    """How much text the retain writes (`write_slots`: a large retain takes a large one's slot)."""
    return sum(len(item.text) for plan in plans for item in plan.items)


async def _write(
    services: Services, bank_id: str, plans: list[DocumentPlan], extraction: Awaitable[Extracted], store_text: bool,
    embedded: Callable[[], AsyncIterator[list[PendingUnit]]], label_keys: frozenset[str] = frozenset(),
    import_wait: float | None = None, claim: Claim | None = None, labels_need_vectors: bool = False,
    on_written: OnWritten | None = None,
) -> None:
    """One transaction: the documents' own rows first, then the facts as `embedded()` hands them over
    with their vectors (new documents' facts may still be being extracted: `extraction` ends when they
    all are), then their entities and links, then whatever `on_written` adds (a sync retain's webhook
    event: written with the facts or not at all). When every fact is extracted by the time the documents
    are written, and no label waits on a vector (`labels_need_vectors`: the offline classifier), the
    entities' reads (`read_entities`: their names, similar names, co-occurrences) run before the facts
    are stored, while the embedder works: the connection sat idle meanwhile, and entity resolution was
    the longest step after the facts (a sync retain ~4 of its ~25 ms, a 100-item bulk call ~65 of
    ~420). What locks (names, entity rows) still comes after the facts.

    A bulk retain that removes no facts searches its semantic links beside the transaction
    (`semantic_links.link_bulk`); one that does searches inside it, where the removed facts are gone
    and cannot take a new fact's places. While an import holds the bank it waits without a connection
    (`writing_to_bank`, up to `import_wait` seconds). A queued retain (`claim`) writes only while its
    worker still holds its operation. A bulk or queued retain gives way to the requests someone waits on
    (`engram.give_way`) before its transaction, each batch of facts and the links."""
    await give_way()  # before its transaction: waiting in it would hold a pooled connection
    # A retain of new documents only goes beside others; one replacing a document goes alone (`_entry`).
    async with writing_to_bank(services.pool, bank_id, import_wait, alone=not all_fresh(plans), claim=claim,
                               slots=retain_slots(services.settings.retain_write_slots, _chars(plans))) as conn:
        removed_facts = await _write_documents(conn, bank_id, plans, extraction, store_text)
        reading: Reading | None = None
        mentions: list[Mention] | None = None  # the facts' entity names, once every fact is extracted
        if extraction.done() and not labels_need_vectors:
            mentions = _mentions(extraction.result().pending)
            reading = await read_entities(conn, bank_id, mentions, label_keys)
            log.debug("read the entities of %d facts while they are embedded", len(mentions))
        stored = 0
        async for ready in embedded():
            await give_way()
            await fw.insert_units(conn, bank_id, [p.row for p in ready])
            stored += len(ready)
        pending = (await extraction).pending  # done: the embedding stream closes when extraction ends
        if stored != len(pending):  # a fact the stream never handed over fails the retain whole
            raise RuntimeError(f"{stored} of {len(pending)} facts came back from the embedder")
        if removed_facts is None:
            await record_fresh_events(conn, bank_id, plans, _facts_added(pending))
        ids = [p.row.id for p in pending]

        async def entities_and_other_links() -> None:
            await fw.insert_sentence_vectors(
                conn, bank_id, [(p.row.id, vector) for p in pending for vector in p.sentence_vectors]
            )
            await store_entities(conn, bank_id, mentions if mentions is not None else _mentions(pending), label_keys,
                                 reading=reading)
            causal = [(p.row.id, pending[c].row.id) for p in pending for c in p.causes]
            await fw.insert_causal_links(conn, bank_id, causal)
            await fw.insert_temporal_links(conn, bank_id, ids)

        await give_way()
        if len(pending) >= BULK_RETAIN_FACTS and not removed_facts:  # None (new documents) or 0
            await semantic_links.link_bulk(conn, services.pool, bank_id, ids, [p.row.embedding for p in pending],
                                           entities_and_other_links())
        else:
            await entities_and_other_links()
            await fw.insert_semantic_links(conn, bank_id, ids)
        if on_written is not None:
            await on_written(conn, len(pending))
        if len(pending) >= BULK_RETAIN_FACTS:
            await publish_write_counts(conn)


async def retain_items(
    services: Services,
    bank_id: str,
    items: list[PreparedItem],
    *,
    progress: Progress | None = None,
    import_wait: float | None = None,
    claim: Claim | None = None,
    on_written: OnWritten | None = None,
) -> RetainOutcome:
    """Retain the items into the bank. While an import into the bank runs, the retain waits for it
    up to `import_wait` seconds, then raises BankBusy (None: for as long as it runs, as a queued
    retain does). A queued retain's `claim` keeps it from writing once its worker no longer holds the
    operation (ClaimLost). `on_written(conn, facts)` runs last in the write's transaction."""
    config = await services.bank_config(bank_id)
    chunk_size = int(config.get("retain_chunk_size") or 3000)
    plans = await _plan_documents(services, bank_id, _group_by_document(items), chunk_size)
    groups = groups_from_config(config)
    free_form = bool(config.get("entities_allow_free_form", True))
    units: dict[str, list[PendingUnit]] = {}
    # More than one chunk is a bulk retain: its CPU work (extraction offline, the model, the names'
    # scoring) gives way to requests someone waits on (`engram.cpu_priority`).
    low = sum(len(plan.chunks) for plan in plans) > 1

    def extracted(plan: DocumentPlan, chunk: ChunkPlan) -> None:
        units[chunk.chunk_id] = _chunk_units(plan, chunk, free_form)
        stream.add(units[chunk.chunk_id])

    async def extract() -> Extracted:
        try:
            usage = await _extract(services, plans, config, groups, progress, extracted)
        finally:
            stream.close()
        pending = _assemble(plans, units)
        if progress:
            await progress("embedding", 0, len(pending))
        return Extracted(pending, usage)

    with cpu_priority.low_priority(low):  # the tasks and threads of the retain carry the flag
        stream = EmbeddingStream()
        extraction = asyncio.ensure_future(extract())
        try:
            if services.llm is not None or not all_fresh(plans):
                # The transaction opens once every fact is extracted: never across LLM calls, nor while
                # documents it replaces wait on their new facts. An offline retain of new documents opens it
                # at once, so PostgreSQL stores the first facts while the rest are extracted and embedded
                # (at 100,000 facts it sat idle for the extraction, ~0.4 s of a 500-item call's 2.6 s).
                await extraction
            else:
                log.debug("writing %d new documents while their facts are extracted", len(plans))

            labels_need_vectors = bool(groups) and services.llm is None

            async def embedded() -> AsyncIterator[list[PendingUnit]]:
                if labels_need_vectors:  # one classification for all (it embeds the labels' values)
                    pending = (await extraction).pending  # every chunk added: the stream may end now
                    await stream.finish()
                    await cpu_priority.to_thread(_label_offline, groups, pending)
                    yield pending
                else:
                    async for ready in stream.embedded():
                        yield ready
                if progress:
                    await progress("writing", 0, len((await extraction).pending))

            # A bulk retain's steps give way to the requests someone waits on (`engram.give_way`), a
            # one-chunk retain's write among them (not its LLM call: nothing to give way to meanwhile);
            # at low priority (`low`, a queued retain) the block marks nothing.
            with waited_on():
                await _write(services, bank_id, plans, extraction, bool(config.get("store_document_text", True)),
                             embedded, frozenset(group.key.lower() for group in groups), import_wait, claim,
                             labels_need_vectors, on_written)
            extracted_facts = extraction.result()  # the write awaited it
            pending, usage = extracted_facts.pending, extracted_facts.usage
        finally:
            if not extraction.done():  # the write failed first
                extraction.cancel()
                with contextlib.suppress(BaseException):
                    await extraction
            elif not extraction.cancelled():
                extraction.exception()  # marked retrieved: when the write failed first, its error is the one raised
            await stream.cancel()
    log.info("retained %d items into %s: %d facts", len(items), bank_id, len(pending))
    if len(pending) >= BULK_RETAIN_FACTS:
        await analyze_if_stale(services.pool, bank_id)
    else:
        analyze_soon_if_bank_undercounted(services.pool, bank_id)
    from engram.consolidate.trigger import after_memory_change
    from engram.entity_observations.engine import after_retain

    await after_retain(services, bank_id, [p.row.id for p in pending], config)
    await after_memory_change(services, bank_id, config)
    return RetainOutcome(items_count=len(items), unit_ids=[p.row.id for p in pending], usage=usage)
