"""Queries that read, list and delete memory units (writes at retain time are in facts_write)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engram.store.bank_removals import Progress
from engram.store.consolidation_status import STATUS_COLUMNS, STATUS_JOIN
from engram.store.entities import recount_entities, refresh_entity_counts
from engram.store.observations import forget_sources, reset_sources
from engram.store.sql import SqlParams, like_pattern, tags_condition
from engram.store.tx import Conn, batches_of
from engram.store.writer_locks import writing_to_bank

log = logging.getLogger(__name__)

# The time columns a list may filter on (`time_field`); the default is the fact's best-known time.
TIME_COLUMNS = ("created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end")

ENTITY_NAMES = """ARRAY(SELECT e.canonical_name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
                     WHERE ue.unit_id = m.id ORDER BY e.canonical_name) AS entity_names"""


@dataclass
class ListFilters:
    fact_type: str | None = None
    q: str | None = None
    document_id: str | None = None
    entity_id: uuid.UUID | None = None
    tags: list[str] | None = None
    tags_match: str = "any"
    consolidation_state: str | None = None  # pending | done (or consolidated) | failed
    state: str | None = None
    time_field: str | None = None  # a column: created_at, updated_at, mentioned_at, occurred_start, occurred_end
    start_date: datetime | None = None
    end_date: datetime | None = None

    def where(self, params: SqlParams, bank_id: str) -> str:
        parts = [f"m.bank_id = {params.add(bank_id)}"]
        if self.fact_type:
            parts.append(f"m.fact_type = {params.add(self.fact_type)}")
        if self.q:
            parts.append(f"m.text ILIKE {params.add(like_pattern(self.q))}")
        if self.document_id:
            parts.append(f"m.document_id = {params.add(self.document_id)}")
        if self.entity_id:
            parts.append(
                f"EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id AND ue.entity_id = "
                f"{params.add(self.entity_id)})"
            )
        condition = tags_condition(params, self.tags, self.tags_match)
        if condition != "TRUE":
            parts.append(condition)
        if self.state:
            parts.append(f"m.state = {params.add(self.state)}")
        if self.consolidation_state == "pending":
            parts.append(_status_is("c.consolidated_at IS NULL AND c.failed_at IS NULL"))
        elif self.consolidation_state in ("done", "consolidated"):
            parts.append(_status_is("c.consolidated_at IS NOT NULL"))
        elif self.consolidation_state == "failed":
            parts.append(_status_is("c.failed_at IS NOT NULL AND c.consolidated_at IS NULL"))
        column = f"m.{self.time_field}" if self.time_field in TIME_COLUMNS else (
            "coalesce(m.occurred_start, m.mentioned_at, m.created_at)"
        )
        if self.start_date:
            parts.append(f"{column} >= {params.add(self.start_date)}")
        if self.end_date:
            parts.append(f"{column} <= {params.add(self.end_date)}")
        return " AND ".join(parts)


def _status_is(condition: str) -> str:
    return f"EXISTS (SELECT 1 FROM consolidation_status c WHERE c.unit_id = m.id AND {condition})"


async def list_units(
    conn: Conn, bank_id: str, filters: ListFilters, *, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    params = SqlParams()
    where = filters.where(params, bank_id)
    # The page is cut on narrow rows (ids and sort keys), then its rows and entity names are read: sorting
    # whole rows (vectors included) or naming every match made a page of a 12,000-fact bank slow.
    order = "coalesce(m.mentioned_at, m.created_at) DESC, m.created_at DESC, m.id"
    rows = await conn.fetch(
        f"""
        SELECT m.*, page.total, {ENTITY_NAMES}, {STATUS_COLUMNS}
        FROM (SELECT m.id, count(*) OVER () AS total FROM memory_units m WHERE {where}
              ORDER BY {order} LIMIT {params.add(limit)} OFFSET {params.add(offset)}) page
        JOIN memory_units m ON m.id = page.id {STATUS_JOIN}
        ORDER BY {order}
        """,
        *params.values,
    )
    if rows:
        return rows, rows[0]["total"]
    count_params = SqlParams()
    total = await conn.fetchval(
        f"SELECT count(*) FROM memory_units m WHERE {filters.where(count_params, bank_id)}", *count_params.values
    )
    return rows, total


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def list_item(row: asyncpg.Record) -> dict[str, Any]:
    """A unit as MemoryUnitListItem (entities as one comma-separated string, as the contract has it)."""
    when = row["occurred_start"] or row["mentioned_at"] or row["created_at"]
    return {
        "id": str(row["id"]),
        "text": row["text"],
        "context": row["context"] or "",
        "date": _iso(when) or "",
        "fact_type": row["fact_type"],
        "document_id": row["document_id"],
        "mentioned_at": _iso(row["mentioned_at"]),
        "occurred_start": _iso(row["occurred_start"]),
        "occurred_end": _iso(row["occurred_end"]),
        "entities": ", ".join(row["entity_names"]),
        "chunk_id": row["chunk_id"],
        "proof_count": row["proof_count"],
        "tags": list(row["tags"]),
        "metadata": row["metadata"] or {},
        "consolidated_at": _iso(row["consolidated_at"]),
        "consolidation_failed_at": _iso(row["consolidation_failed_at"]),
        "state": row["state"],
        "invalidation_reason": row.get("invalidation_reason"),  # columns of migration 010
        "invalidated_at": _iso(row.get("invalidated_at")),
        "edited_at": _iso(row.get("edited_at")),
        "updated_at": _iso(row["updated_at"]),
        "source_memory_ids": [str(s) for s in row["source_memory_ids"]],
    }


async def get_unit(conn: Conn, bank_id: str, unit_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT m.*, {ENTITY_NAMES}, {STATUS_COLUMNS} FROM memory_units m {STATUS_JOIN}"
        " WHERE m.bank_id = $1 AND m.id = $2",
        bank_id,
        unit_id,
    )


def detail_item(row: asyncpg.Record) -> dict[str, Any]:
    item = list_item(row)
    item.update(
        {
            "bank_id": row["bank_id"],
            "type": row["fact_type"],
            "fact_kind": row["fact_kind"],
            "entities": list(row["entity_names"]),
            "observation_scopes": row["observation_scopes"],
            "created_at": _iso(row["created_at"]),
            "evidence": row["evidence"],
            "consolidation_error": row["consolidation_error"],
        }
    )
    return item


async def delete_units_where(conn: asyncpg.Connection, where_sql: str, *args: Any) -> list[uuid.UUID]:
    """Delete the units matching a condition on `memory_units m` and keep what depends on them right:
    entity mention and co-occurrence counts (orphan entities go), and observations built on them
    (those left with no source go; the others' remaining sources are consolidated again)."""
    mentions = await conn.fetch(
        f"SELECT ue.unit_id, ue.entity_id FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id"
        f" WHERE {where_sql}",
        *args,
    )
    rows = await conn.fetch(f"DELETE FROM memory_units m WHERE {where_sql} RETURNING m.id, m.bank_id", *args)
    await refresh_entity_counts(conn, [r["unit_id"] for r in mentions], [r["entity_id"] for r in mentions])
    deleted = [row["id"] for row in rows]
    for bank_id in {row["bank_id"] for row in rows}:
        await forget_sources(conn, bank_id, deleted)
    return deleted


# Facts (or documents) a whole-bank delete removes per statement: each statement takes seconds at any
# bank size, far below the pool's 300 s command timeout (one statement for all of a 100,000-memory
# bank's facts took 4.7 s, so ~8 min at 10 M), and a chunk's links are one index range per fact.
BANK_DELETE_CHUNK = 20_000


async def delete_bank_memories(
    conn: asyncpg.Connection, bank_id: str, *, chunk: int | None = None, progress: Progress | None = None,
) -> int:
    """Delete all of a bank's facts, documents and entities; returns the number of facts. Runs in the
    caller's transaction, so it is all or nothing. `progress(facts deleted so far)` after each chunk
    (of documents too, with the same count: `bank_removals` then knows the delete is still going).

    The order matters at scale: the keyword postings go by bank first, and each chunk's links go by
    their facts before the facts do, rather than through the facts' triggers (a join per removed
    fact). The facts go before their documents, whose cascade would remove them one by one, each
    removal firing the facts' statement triggers again. The chunks come from cursors, which read the
    bank's ids once, as they were when the delete began."""
    chunk = chunk or BANK_DELETE_CHUNK
    await conn.execute("DELETE FROM keyword_postings WHERE bank_id = $1", bank_id)
    facts = 0
    async for ids in _chunks_of(conn, chunk, "SELECT id FROM memory_units WHERE bank_id = $1", bank_id):
        facts += await _delete_facts(conn, ids)
        await _report(progress, bank_id, "facts", facts, chunk)
    async for ids in _chunks_of(conn, chunk, "SELECT id FROM documents WHERE bank_id = $1", bank_id):
        await conn.execute("DELETE FROM documents WHERE bank_id = $1 AND id = ANY($2::text[])", bank_id, ids)
        if progress is not None:
            await progress(facts)
    await conn.execute("DELETE FROM entities WHERE bank_id = $1", bank_id)
    return facts


async def _report(progress: Progress | None, bank_id: str, what: str, done: int, chunk: int) -> None:
    """A chunk deleted: to `progress` (`bank_removals`), and to the log when the bank is big enough to
    take several statements."""
    if done >= chunk:
        log.info("bank %r: %d %s deleted so far (not committed yet)", bank_id, done, what)
    if progress is not None:
        await progress(done)


async def _chunks_of(conn: asyncpg.Connection, size: int, query: str, *args: Any) -> AsyncIterator[list[Any]]:
    """The first column of a query's rows, `size` at a time (`batches_of`)."""
    async for rows in batches_of(conn, size, query, *args):
        yield [row[0] for row in rows]


async def _delete_facts(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> int:
    """One chunk of facts: their links by source fact first (one index range each), rather than
    through the facts' trigger (a join per removed fact); returns the facts deleted."""
    await conn.execute("DELETE FROM memory_links WHERE from_unit = ANY($1::uuid[])", ids)
    status = await conn.execute("DELETE FROM memory_units WHERE id = ANY($1::uuid[])", ids)
    return int(status.split()[-1])


async def clear_units(
    conn: Conn, bank_id: str, fact_type: str | None, progress: Progress | None = None, *, import_wait: float | None,
) -> int:
    """Delete the bank's facts of one type, or all its memories. While an import holds the bank, waits
    for it (given the pool, without a connection: `writing_to_bank`)."""
    async with writing_to_bank(conn, bank_id, import_wait, make_bank=False, undone="deleted") as tx:
        if fact_type is None:
            return await delete_bank_memories(tx, bank_id, progress=progress)
        if fact_type == "observation":
            return await clear_observations(tx, bank_id)
        return await delete_facts_of_type(tx, bank_id, fact_type, progress=progress)


async def delete_facts_of_type(
    conn: asyncpg.Connection, bank_id: str, fact_type: str, *, chunk: int | None = None,
    progress: Progress | None = None,
) -> int:
    """Delete all of a bank's world (or experience) facts, `chunk` per statement as in
    `delete_bank_memories`; returns their number. Observations built on a chunk's facts lose them as
    sources (those left with none go). The entities they mentioned are recounted once, at the end:
    per chunk, the same entities' pairs would be recounted again and again."""
    chunk = chunk or BANK_DELETE_CHUNK
    mentioned: set[uuid.UUID] = set()
    facts = 0
    query = "SELECT id FROM memory_units WHERE bank_id = $1 AND fact_type = $2"
    async for ids in _chunks_of(conn, chunk, query, bank_id, fact_type):
        mentioned.update(await conn.fetchval(
            "SELECT coalesce(array_agg(DISTINCT entity_id), '{}') FROM unit_entities"
            " WHERE unit_id = ANY($1::uuid[])",
            ids,
        ))
        facts += await _delete_facts(conn, ids)
        await forget_sources(conn, bank_id, ids)
        await _report(progress, bank_id, f"{fact_type} facts", facts, chunk)
    await recount_entities(conn, list(mentioned))
    return facts


async def clear_observations(conn: asyncpg.Connection, bank_id: str) -> int:
    """Delete every observation of the bank; every fact waits for consolidation again."""
    status = await conn.execute("DELETE FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'", bank_id)
    await conn.execute(
        "UPDATE consolidation_status SET consolidated_at = NULL, failed_at = NULL, error = NULL"
        " WHERE bank_id = $1 AND (consolidated_at IS NOT NULL OR failed_at IS NOT NULL)",
        bank_id,
    )
    return int(status.split()[-1])


async def clear_observations_of(conn: asyncpg.Connection, bank_id: str, unit_id: uuid.UUID) -> int:
    """Delete the observations citing one memory; it and their other sources wait for consolidation again."""
    rows = await conn.fetch(
        "DELETE FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation' AND $2 = ANY(source_memory_ids)"
        " RETURNING source_memory_ids",
        bank_id,
        unit_id,
    )
    await reset_sources(conn, list({unit_id, *(s for row in rows for s in row["source_memory_ids"])}))
    return len(rows)


async def list_tags(
    conn: Conn, bank_id: str, *, q: str | None, source: str, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    table = {"mental_models": "mental_models", "documents": "documents"}.get(source, "memory_units")
    rows = await conn.fetch(
        f"""
        SELECT tag, count(*) AS count, count(*) OVER () AS total
        FROM {table} t, unnest(t.tags) AS tag
        WHERE t.bank_id = $1 AND ($2::text IS NULL OR tag ILIKE $2)
        GROUP BY tag ORDER BY count(*) DESC, tag LIMIT $3 OFFSET $4
        """,
        bank_id,
        like_pattern(q, star_wildcard=True) if q is not None else None,
        limit,
        offset,
    )
    return rows, (rows[0]["total"] if rows else 0)
