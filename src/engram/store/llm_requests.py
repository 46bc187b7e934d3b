"""Queries on `llm_requests` (LLM traces)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from engram.store.tx import Conn

COLUMNS = ("id", "bank_id", "operation", "scope", "provider", "model", "status", "started_at", "ended_at",
           "duration_ms", "input_tokens", "output_tokens", "input", "output", "error", "metadata")
FILTERS = ("status", "operation", "scope", "provider")


async def insert(conn: Conn, entry: dict[str, Any]) -> None:
    placeholders = ", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))
    await conn.execute(f"INSERT INTO llm_requests ({', '.join(COLUMNS)}) VALUES ({placeholders})",
                       *(entry[c] for c in COLUMNS))


async def prune(conn: Conn, retention_days: int) -> None:
    await conn.execute("DELETE FROM llm_requests WHERE started_at < now() - make_interval(days => $1)",
                       retention_days)


def _where(filters: dict[str, Any], start: datetime | None, end: datetime | None) -> tuple[str, list[Any]]:
    """WHERE for the bank (always $1) and the filters given; column names come from FILTERS only."""
    values: list[Any] = [filters["bank_id"]]
    parts = ["bank_id = $1"]
    for name in FILTERS:
        if filters.get(name) is not None:
            values.append(filters[name])
            parts.append(f"{name} = ${len(values)}")
    if filters.get("operation_id"):
        values.append(filters["operation_id"])
        parts.append(f"metadata->>'operation_id' = ${len(values)}")
    for column, op, value in (("started_at", ">=", start), ("started_at", "<", end)):
        if value is not None:
            values.append(value)
            parts.append(f"{column} {op} ${len(values)}")
    return " AND ".join(parts), values


async def list_requests(conn: Conn, filters: dict[str, Any], start: datetime | None, end: datetime | None,
                        limit: int, offset: int) -> tuple[list[asyncpg.Record], int]:
    where, values = _where(filters, start, end)
    n = len(values)
    rows = await conn.fetch(f"SELECT * FROM llm_requests WHERE {where} ORDER BY started_at DESC, id DESC"
                            f" LIMIT ${n + 1} OFFSET ${n + 2}", *values, limit, offset)
    total = await conn.fetchval(f"SELECT count(*) FROM llm_requests WHERE {where}", *values)
    return list(rows), total


async def per_bucket(conn: Conn, filters: dict[str, Any], trunc: str, since: datetime) -> list[asyncpg.Record]:
    where, values = _where(filters, since, None)
    n = len(values)
    return await conn.fetch(
        f"""
        SELECT date_trunc(${n + 1}, started_at AT TIME ZONE 'UTC') AS bucket, status, count(*)::int AS count,
               coalesce(sum(input_tokens), 0)::int AS input, coalesce(sum(output_tokens), 0)::int AS output
        FROM llm_requests WHERE {where} GROUP BY 1, 2
        """,
        *values, trunc,
    )
