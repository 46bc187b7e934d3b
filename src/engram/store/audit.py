"""Queries on `audit_logs`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from engram.store.tx import Conn

COLUMNS = ("id", "bank_id", "action", "transport", "api_key_id", "method", "route", "path", "status_code",
           "started_at", "ended_at", "duration_ms", "request", "response", "metadata")


async def insert(conn: Conn, entry: dict[str, Any]) -> None:
    placeholders = ", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))
    await conn.execute(f"INSERT INTO audit_logs ({', '.join(COLUMNS)}) VALUES ({placeholders})",
                       *(entry[c] for c in COLUMNS))


async def prune(conn: Conn, retention_days: int) -> int:
    result = await conn.execute(
        "DELETE FROM audit_logs WHERE started_at < now() - make_interval(days => $1)", retention_days
    )
    return int(result.split()[-1])


FILTER = """bank_id = $1 AND ($2::text IS NULL OR action = $2) AND ($3::text IS NULL OR transport = $3)
            AND ($4::timestamptz IS NULL OR started_at >= $4) AND ($5::timestamptz IS NULL OR started_at < $5)"""


async def list_entries(conn: Conn, bank_id: str, action: str | None, transport: str | None,
                       start: datetime | None, end: datetime | None, limit: int,
                       offset: int) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        f"SELECT id, bank_id, action, transport, api_key_id, started_at, ended_at, duration_ms, metadata"
        f" FROM audit_logs WHERE {FILTER} ORDER BY started_at DESC, id DESC LIMIT $6 OFFSET $7",
        bank_id, action, transport, start, end, limit, offset,
    )
    total = await conn.fetchval(f"SELECT count(*) FROM audit_logs WHERE {FILTER}", bank_id, action, transport,
                                start, end)
    return list(rows), total


async def get_entry(conn: Conn, bank_id: str, entry_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM audit_logs WHERE bank_id = $1 AND id = $2", bank_id, entry_id)


async def counts_per_bucket(conn: Conn, bank_id: str, action: str | None, trunc: str,
                            since: datetime) -> list[asyncpg.Record]:
    return await conn.fetch(
        """
        SELECT date_trunc($3, started_at AT TIME ZONE 'UTC') AS bucket, action, count(*)::int AS count
        FROM audit_logs WHERE bank_id = $1 AND ($2::text IS NULL OR action = $2) AND started_at >= $4
        GROUP BY 1, 2
        """,
        bank_id, action, trunc, since,
    )
