"""A bank as a transfer archive, written as it is read: its documents with chunks and facts,
observations (with their history), the links between facts, and with the bank's config its profile,
mental models (with history) and directives."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg

from engram.errors import BankNotFound, InvalidInput
from engram.store import transfer_reads as reads
from engram.store.banks import get_bank
from engram.store.tx import Conn
from engram.transfer.archive import LINK_BATCH, Archive, ArchiveWriter, manifest_of

Position = dict[uuid.UUID, tuple[str, int]]  # fact id → (document id, index in its document's facts)
DOCUMENT_BATCH = 1_000  # documents read, built and written per step
OBSERVATION_BATCH = 5_000  # observations read and built per step


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _fact(row: Any, position: dict[uuid.UUID, int]) -> dict[str, Any]:
    return {
        "text": row["text"], "source_id": str(row["id"]), "fact_type": row["fact_type"], "context": row["context"],
        "event_date": _iso(row["occurred_start"] or row["mentioned_at"] or row["created_at"]),
        "occurred_start": _iso(row["occurred_start"]), "occurred_end": _iso(row["occurred_end"]),
        "mentioned_at": _iso(row["mentioned_at"]), "metadata": row["metadata"] or {}, "tags": list(row["tags"]),
        "observation_scopes": row["observation_scopes"], "chunk_index": row["chunk_index"],
        "entities": list(row["free_names"]),
        "causal_relations": [{"relation_type": "caused_by", "target_fact_index": position[c]}
                             for c in row["causes"] if c in position],
        "created_at": _iso(row["created_at"]), "consolidated_at": _iso(row["consolidated_at"]),
        "consolidation_failed_at": _iso(row["consolidation_failed_at"]),
        # Engram's own, ignored by Hindsight:
        "labels": list(row["label_names"]), "fact_kind": row["fact_kind"], "lead_in": row["lead_in"],
        "state": row["state"], "invalidation_reason": row["invalidation_reason"],
        "invalidated_at": _iso(row["invalidated_at"]), "edited_at": _iso(row["edited_at"]),
        "consolidation_error": row["consolidation_error"],
    }


def _retain_params(doc: Any) -> dict[str, Any]:
    """Hindsight keeps a document's metadata in `retain_params.metadata` and reads it back only from
    there, so the archive's `retain_params` carries it; `engram_retain_params` keeps them as stored."""
    stored = doc["retain_params"]
    if not doc["metadata"]:
        return {"retain_params": stored}
    return {"retain_params": {**(stored or {}), "metadata": doc["metadata"]}, "engram_retain_params": stored}


def _write_documents(
    writer: ArchiveWriter, docs: list[Any], chunk_rows: list[Any], fact_rows: list[Any], attachment_rows: list[Any],
) -> tuple[int, int]:
    """A batch of documents built and written, with their attachments (run on a thread). Returns the
    facts and attachments written."""
    chunks: dict[str, list[dict[str, Any]]] = {}
    for row in chunk_rows:
        chunk = {"chunk_index": row["chunk_index"], "chunk_text": row["chunk_text"]}
        chunks.setdefault(row["document_id"], []).append(chunk)
    by_doc: dict[str, list[Any]] = {}
    for row in fact_rows:
        by_doc.setdefault(row["document_id"], []).append(row)
    documents = []
    for doc in docs:
        rows = by_doc.get(doc["id"], [])
        local = {row["id"]: i for i, row in enumerate(rows)}
        documents.append({
            "id": doc["id"], "original_text": doc["original_text"], **_retain_params(doc),
            "tags": list(doc["tags"]), "created_at": _iso(doc["created_at"]),
            "chunks": chunks.get(doc["id"], []),
            "facts": [_fact(row, local) for row in rows],
            "metadata": doc["metadata"], "observation_scopes": doc["observation_scopes"],
            "updated_at": _iso(doc["updated_at"]),
        })
    writer.add_documents(documents, [_attachment(row) for row in attachment_rows])
    return len(fact_rows), len(attachment_rows)


def _sources(ids: list[uuid.UUID], positions: Position) -> list[dict[str, Any]]:
    return [{"document_id": positions[i][0], "fact_index": positions[i][1]} for i in ids if i in positions]


def _evidence(items: list[dict[str, Any]], positions: Position) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        fact = uuid.UUID(item["fact_id"]) if item.get("fact_id") else None
        if fact in positions:
            document_id, index = positions[fact]
            out.append({"document_id": document_id, "fact_index": index, "quote": item.get("quote")})
    return out


async def _write_observations(
    conn: asyncpg.Connection, bank_id: str, only: list[str] | None, writer: ArchiveWriter,
) -> None:
    """The bank's observations with their history, their sources named by the places of the facts,
    OBSERVATION_BATCH at a time: each batch's history and the places of the facts it names are read
    with it, and its entries built and written on a thread while the next is read. Read and held at
    once, 50,000 observations stalled the event loop for up to 0.17 s as their rows were decoded, and
    the entries held (millions of small objects) made each full garbage collection longer as they grew."""
    async with _WriteAhead() as writes:
        async for rows in reads.observation_batches(conn, bank_id, OBSERVATION_BATCH):
            history_rows = await reads.observation_history(conn, bank_id, [row["id"] for row in rows])
            named = await asyncio.to_thread(_facts_named, [*history_rows, *rows])
            places = await reads.fact_places(conn, bank_id, only, named)
            await writes.submit(_add_observations, writer, history_rows, rows, places)


def _add_observations(writer: ArchiveWriter, history_rows: list[Any], rows: list[Any], places: list[Any]) -> None:
    writer.add_observations(_observation_entries(history_rows, rows, places))


def _facts_named(rows: list[Any]) -> list[uuid.UUID]:
    """The facts the observations (or their past versions) name: their sources and their evidence."""
    named: set[uuid.UUID] = set()
    for row in rows:
        named.update(row["source_memory_ids"])
        named.update(uuid.UUID(item["fact_id"]) for item in row["evidence"] or [] if item.get("fact_id"))
    return list(named)


def _observation_entries(history_rows: list[Any], rows: list[Any], places: list[Any]) -> list[dict[str, Any]]:
    positions = {place["id"]: (place["document_id"], place["fact_index"]) for place in places}
    history: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for row in history_rows:
        history.setdefault(row["observation_id"], []).append({
            "text": row["text"], "sources": _sources(list(row["source_memory_ids"]), positions),
            "evidence": _evidence(row["evidence"], positions), "reason": row["reason"],
            "changed_at": _iso(row["changed_at"]),
        })
    out = []
    for row in rows:
        sources = _sources(list(row["source_memory_ids"]), positions)
        if len(sources) < len(row["source_memory_ids"]):
            continue  # as Hindsight: only observations whose every source is in the archive
        out.append({
            "source_id": str(row["id"]), "text": row["text"], "created_at": _iso(row["created_at"]),
            "tags": list(row["tags"]), "event_date": _iso(row["occurred_start"] or row["mentioned_at"]),
            "occurred_start": _iso(row["occurred_start"]), "occurred_end": _iso(row["occurred_end"]),
            "mentioned_at": _iso(row["mentioned_at"]), "observation_scopes": row["observation_scopes"],
            "proof_count": row["proof_count"], "sources": sources,
            "evidence": _evidence(row["evidence"], positions), "history": history.get(row["id"], []),
            "updated_at": _iso(row["updated_at"]),
        })
    return out


def _bank_row(bank: Any) -> dict[str, Any]:
    config = dict(bank["config"] or {})
    disposition = {t: config.pop(f"disposition_{t}", 3) for t in ("empathy", "literalism", "skepticism")}
    return {
        "bank_id": bank["bank_id"], "name": bank["name"], "disposition": json.dumps(disposition),
        "created_at": _iso(bank["created_at"]), "updated_at": _iso(bank["updated_at"]),
        "mission": bank["mission"] or "", "background": bank["background"], "config": json.dumps(config),
        "engram_config": json.dumps(bank["config"] or {}),  # as set: defaults stay defaults
    }


def _rows(records: list[Any], json_columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out = []
    for record in records:
        row = {k: v for k, v in dict(record).items() if k not in ("embedding", "id_1")}
        for key, value in row.items():
            if isinstance(value, datetime):
                row[key] = value.isoformat()
            elif isinstance(value, uuid.UUID):
                row[key] = str(value)
            elif key in json_columns and value is not None:
                row[key] = json.dumps(value)
        out.append(row)
    return out


async def _bank_config_tables(conn: Conn, bank_id: str) -> dict[str, list[dict[str, Any]]]:
    history = _rows(await reads.mental_model_history(conn, bank_id))
    for row in history:
        row["changed_at"] = row.pop("replaced_at")
        row.pop("id", None)
    return {
        "mental_models": _rows(await reads.mental_models(conn, bank_id), ("trigger", "reflect_response")),
        "mental_model_history": history,
        "directives": _rows(await reads.directives(conn, bank_id)),
        "webhooks": [], "knowledge_pages": [],
    }


def _attachment(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]), "document_id": row["document_id"], "chunk_index": row["chunk_index"],
        "block_index": row["block_index"], "text_offset": row["text_offset"], "kind": row["kind"], "role": row["role"],
        "media_type": row["media_type"], "filename": row["filename"], "byte_size": row["byte_size"],
        "sha256": row["sha256"], "created_at": _iso(row["created_at"]),
        "path": f"attachments/{row['id']}", "data": bytes(row["data"]),
    }


async def write_bank_archive(
    conn: asyncpg.Connection, bank_id: str, writer: ArchiveWriter, progress: Callable[[int, int], Awaitable[None]],
    *, include_data: bool = True,
    include_bank_config: bool = True, document_ids: list[str] | None = None, include_observations: bool = True,
    archive_type: str = "bank",
) -> dict[str, Any]:
    """The bank's archive through `writer`, finished; returns its manifest. Run in one repeatable-read
    transaction (one snapshot). The documents are read DOCUMENT_BATCH at a time, the observations
    OBSERVATION_BATCH and the links LINK_BATCH at a time, each batch built and written on a thread, so
    memory stays flat whatever the bank's size (a 100,000-memory bank's documents and ~5 million
    links, held at once, took gigabytes) and the server keeps answering meanwhile. The links and the
    observations name facts by their places, which PostgreSQL computes (`reads.link_lines`,
    `reads.fact_places`), and a fact's causes (the facts of its document it was caused by) are read with it.
    `progress(done, total)`: steps done, of the documents, the batches of links (the links of a whole
    bank are counted with those whose ends are observations, not archived) and one more step (the rest)."""
    bank = await get_bank(conn, bank_id)
    if bank is None:
        raise BankNotFound(bank_id)
    if document_ids is not None and include_observations and archive_type == "documents":
        raise InvalidInput("include_observations", "observations can only be exported with the whole bank")
    archive = Archive(manifest={}, banks=[_bank_row(bank)] if include_bank_config else [])
    counts = {"document_count": 0, "fact_count": 0, "attachment_count": 0}
    total = 1
    if include_data:
        links = await reads.link_count(conn, bank_id, document_ids)
        total += await reads.document_count(conn, bank_id, document_ids) + math.ceil(links / LINK_BATCH)
    await progress(0, total)
    if include_data:
        async for docs in reads.document_batches(conn, bank_id, document_ids, DOCUMENT_BATCH):
            ids = [doc["id"] for doc in docs]
            chunks, facts = await reads.chunks_of(conn, bank_id, ids), await reads.facts_of(conn, bank_id, ids)
            attachments = await reads.attachments_of(conn, bank_id, ids)
            written = await asyncio.to_thread(_write_documents, writer, docs, chunks, facts, attachments)
            counts["document_count"] += len(docs)
            counts["fact_count"] += written[0]
            counts["attachment_count"] += written[1]
            await progress(counts["document_count"], total)
        if include_observations:
            await _write_observations(conn, bank_id, document_ids, writer)
            counts["observation_count"] = writer.observations_written
    archive.tables = await _bank_config_tables(conn, bank_id) if include_bank_config else {}
    await asyncio.to_thread(writer.write_tables, archive)
    if include_data:
        writer.add_links([])  # links.json even for a bank with none: the importer then rebuilds none
        await _write_links(conn, bank_id, document_ids, writer, lambda batches: progress(
            min(counts["document_count"] + batches, total - 1), total))
        counts["link_count"] = writer.links_written
    scope = {"data": include_data, "bank_config": include_bank_config, "history": False}
    manifest = manifest_of(bank_id, archive, counts, archive_type=archive_type, scope=scope)
    await asyncio.to_thread(writer.finish, manifest)
    await progress(total, total)
    return manifest


async def _write_links(
    conn: asyncpg.Connection, bank_id: str, only: list[str] | None, writer: ArchiveWriter,
    progress: Callable[[int], Awaitable[None]],
) -> None:
    """The links, a batch written on a thread while PostgreSQL reads the next (on one core in turn,
    5.15 million links took ~24 s). `progress(batches)` after each batch written."""
    submitted = 0
    async with _WriteAhead() as writes:
        async for lines in reads.link_lines(conn, bank_id, only, LINK_BATCH):
            await writes.submit(writer.add_link_lines, lines)
            submitted += 1
            if submitted > 1:  # the batch before is written
                await progress(submitted - 1)
    if submitted:
        await progress(submitted)


class _WriteAhead:
    """One write at a time on a thread while the event loop reads the next batch: `submit` waits for
    the write before, leaving the context for the last. A failed read waits for the write in flight,
    so the writer is never left writing past the export's end."""

    def __init__(self) -> None:
        self._pending: asyncio.Future[None] | None = None

    async def submit(self, write: Callable[..., None], *args: Any) -> None:
        await self._finish_pending()
        self._pending = asyncio.ensure_future(asyncio.to_thread(write, *args))

    async def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            await pending

    async def __aenter__(self) -> _WriteAhead:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            await self._finish_pending()
        elif self._pending is not None:
            await asyncio.gather(self._pending, return_exceptions=True)
