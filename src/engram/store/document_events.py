"""A document's history (migration 010): one row per thing that changed it — retained, appended,
reprocessed, retagged, one of its facts edited — as Hindsight's DocumentEvent."""

from __future__ import annotations

import uuid

import asyncpg

from engram.store.tx import Conn

KINDS = ("retain", "append", "reprocess", "retag", "fact_edited", "fact_invalidated", "fact_restored",
         "fact_deleted", "observations_cleared", "consolidation")


async def record(
    conn: Conn, bank_id: str, document_id: str, kind: str, *, operation_id: uuid.UUID | None = None,
    fact_id: uuid.UUID | None = None, facts_added: int = 0, facts_removed: int = 0,
    observations_removed: list[uuid.UUID] | None = None,
) -> None:
    await conn.execute(
        """
        INSERT INTO document_events (bank_id, document_id, kind, operation_id, fact_id, facts_added,
                                     facts_removed, observations_removed)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        """,
        bank_id, document_id, kind, operation_id, fact_id, facts_added, facts_removed, observations_removed or [],
    )


async def list_events(
    conn: Conn, bank_id: str, document_id: str, *, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        """
        SELECT *, count(*) OVER () AS total FROM document_events WHERE bank_id = $1 AND document_id = $2
        ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4
        """,
        bank_id, document_id, limit, offset,
    )
    if rows:
        return rows, rows[0]["total"]
    total = await conn.fetchval(
        "SELECT count(*) FROM document_events WHERE bank_id = $1 AND document_id = $2", bank_id, document_id
    )
    return rows, total
