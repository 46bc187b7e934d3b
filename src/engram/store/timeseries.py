"""Memories per time bucket and fact type, for the bank's ingestion chart."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from engram.store.tx import Conn

# Whitelisted: the column is written into the SQL, never a bound parameter.
TIME_COLUMNS = {
    "created_at": "m.created_at",
    "mentioned_at": "coalesce(m.mentioned_at, m.created_at)",
    "occurred_start": "coalesce(m.occurred_start, m.created_at)",
}
TRUNCS = ("minute", "hour", "day")


async def memories_per_bucket(
    conn: Conn, bank_id: str, time_field: str, trunc: str, since: datetime
) -> list[asyncpg.Record]:
    """(bucket in UTC, fact_type, count) rows of the bank's memories since `since`."""
    column = TIME_COLUMNS[time_field]
    if trunc not in TRUNCS:
        raise ValueError(f"unknown trunc {trunc!r}")
    return await conn.fetch(
        f"""
        SELECT date_trunc($3, {column} AT TIME ZONE 'UTC') AS bucket, m.fact_type, count(*)::int AS count
        FROM memory_units m
        WHERE m.bank_id = $1 AND {column} >= $2
        GROUP BY 1, 2
        """,
        bank_id,
        since,
        trunc,
    )
