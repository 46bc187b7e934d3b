"""An archive's documents into a bank, DOCUMENT_BATCH at a time: each batch is parsed, turned into rows
and embedded on a thread while the batch before it is written, so the import holds two batches at
most (a 100,000-document archive held whole took ~2 GB) and the event loop never builds rows."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engram.retain.entities import Mention, store_entities
from engram.retain.facts import embedding_text
from engram.store import attachments as attachment_store
from engram.store import facts_write as fw
from engram.store import transfer_writes as tw
from engram.store.memories import delete_units_where
from engram.transfer import import_rows as rows
from engram.transfer.fact_places import FactPlaces

DOCUMENT_BATCH = 1_000
# Facts inserted per statement: all of a 100,000-fact archive in one took ~100 s (each enters the
# vector index), so ~300,000 would meet the 300 s command timeout.
FACT_BATCH = 10_000


@dataclass
class Batch:
    """Documents of the archive ready to write: their rows, embedded; the skipped ones' ids."""
    documents: list[rows.DocumentRows] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def units(self) -> list[rows.UnitPlan]:
        return [u for d in self.documents for u in d.units]


@dataclass
class Written:
    """What the documents' writing leaves for the rest of the import, and its counts."""
    places: FactPlaces = field(default_factory=FactPlaces)  # every imported fact, by its place in the archive
    documents: int = 0
    skipped: int = 0
    replaced: int = 0
    facts: int = 0
    chunks: int = 0
    attachments: int = 0


def target_ids(sources: Iterable[str], existing: set[str], conflict: str) -> dict[str, str | None]:
    """Each archived document's id in the target bank (None: skipped), given the ids it already has."""
    mapping: dict[str, str | None] = {}
    for source in sources:
        if source not in existing or conflict == "replace":
            mapping[source] = source
        elif conflict == "new-id":
            mapping[source] = f"{source}-{uuid.uuid4().hex[:8]}"
        else:
            mapping[source] = None
    return mapping


def _prepared(documents: list[dict[str, Any]], mapping: dict[str, str | None] | None) -> Batch:
    """The batch's rows, embedded (`mapping` None: every document keeps its id, as in a restore)."""
    from engram.models.embedder import embedder
    from engram.models.tokens import count_tokens_batch

    batch = Batch()
    for doc in documents:
        target = doc["id"] if mapping is None else mapping.get(doc["id"])
        if target is None:
            batch.skipped.append(doc["id"])
        else:
            batch.documents.append(rows.document_rows(doc, target))
    units = batch.units
    if units:
        texts = [embedding_text(u.row.text, u.row.occurred_start or u.row.mentioned_at, u.names) for u in units]
        counts = count_tokens_batch([u.row.text for u in units])
        for unit, vector, tokens in zip(units, embedder().embed(texts), counts, strict=True):
            unit.row.embedding, unit.row.token_count = vector, tokens
    return batch


def in_batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """`items` in lists of `size` (the last one shorter), taken as they come."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


async def prepared_batches(
    documents: Iterable[dict[str, Any]], mapping: dict[str, str | None] | None
) -> AsyncIterator[Batch]:
    """The documents DOCUMENT_BATCH at a time, ready to write; the next batch is read and prepared on a
    thread while the caller writes the current one."""
    source = in_batches(documents, DOCUMENT_BATCH)

    def next_batch() -> Batch | None:
        raw = next(source, None)
        return None if raw is None else _prepared(raw, mapping)

    pending = asyncio.ensure_future(asyncio.to_thread(next_batch))
    try:
        while (batch := await pending) is not None:
            pending = asyncio.ensure_future(asyncio.to_thread(next_batch))
            yield batch
    finally:
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pending  # the thread finishes its batch; the import is over either way


async def write_batch(
    conn: Any, bank_id: str, batch: Batch, attachments: dict[str, list[dict[str, Any]]], replace: set[str],
    written: Written,
) -> None:
    """The batch's documents, chunks, attachments and facts with their entities and causal links, a
    statement per table (`replace`: the target ids whose stored document goes first)."""
    documents = batch.documents
    if replaced := [doc.document_id for doc in documents if doc.document_id in replace]:
        await delete_units_where(conn, "m.bank_id = $1 AND m.document_id = ANY($2::text[])", bank_id, replaced)
        await conn.execute("DELETE FROM documents WHERE bank_id = $1 AND id = ANY($2::text[])", bank_id, replaced)
    # one row per id (an archive naming a document twice: the later one's row, as when upserted in turn)
    await fw.upsert_documents(conn, bank_id, list({doc.document_id: _document_row(doc) for doc in documents}.values()))
    await tw.set_documents_created(conn, bank_id, [
        (doc.document_id, created) for doc in documents if (created := rows.when(doc.source.get("created_at")))])
    await fw.insert_chunks_of_documents(conn, bank_id, [
        (chunk_id, doc.document_id, index, text, digest) for doc in documents
        for chunk_id, index, text, digest in doc.chunks])
    for doc in documents:
        doc.attachments = rows.attachment_rows(attachments.get(doc.source_id, []), doc)
    await attachment_store.insert(conn, bank_id, [a for doc in documents for a in doc.attachments])
    units = batch.units
    for start in range(0, len(units), FACT_BATCH):
        part = units[start:start + FACT_BATCH]
        await fw.insert_units(conn, bank_id, [u.row for u in part])
        await tw.set_unit_lifecycle(conn, [u.lifecycle for u in part])
        await store_entities(conn, bank_id, [Mention(u.row.id, u.names, False, u.labels) for u in part],
                             sole_writer=True)
    await fw.insert_causal_links(conn, bank_id, [pair for doc in documents for pair in doc.causal])
    for doc in documents:
        written.places.add(doc.source_id, [u.row.id for u in doc.units])
    written.documents += len(documents)
    written.skipped += len(batch.skipped)
    written.replaced += len(replaced)
    written.facts += len(units)
    written.chunks += sum(len(doc.chunks) for doc in documents)
    written.attachments += sum(len(doc.attachments) for doc in documents)


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
