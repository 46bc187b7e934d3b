"""Queries on `webhooks` and `webhook_deliveries`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from engram.store.sql import SqlParams
from engram.store.tx import Conn

UPDATABLE = ("url", "secret", "event_types", "enabled", "http_config")


async def create_webhook(conn: Conn, bank_id: str, fields: dict[str, Any]) -> asyncpg.Record:
    return await conn.fetchrow(
        "INSERT INTO webhooks (id, bank_id, url, secret, event_types, enabled, http_config)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
        uuid.uuid4(), bank_id, fields["url"], fields["secret"], fields["event_types"], fields["enabled"],
        fields["http_config"],
    )


async def get_webhook(conn: Conn, bank_id: str, webhook_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM webhooks WHERE bank_id = $1 AND id = $2", bank_id, webhook_id)


async def list_webhooks(conn: Conn, bank_id: str, limit: int, offset: int) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        "SELECT *, count(*) OVER () AS total FROM webhooks WHERE bank_id = $1 ORDER BY created_at, id"
        " LIMIT $2 OFFSET $3",
        bank_id, limit, offset,
    )
    total = rows[0]["total"] if rows else await conn.fetchval("SELECT count(*) FROM webhooks WHERE bank_id = $1",
                                                              bank_id)
    return list(rows), total


async def update_webhook(conn: Conn, bank_id: str, webhook_id: uuid.UUID,
                         changes: dict[str, Any]) -> asyncpg.Record | None:
    params = SqlParams()
    sets = [f"{name} = {params.add(changes[name])}" for name in UPDATABLE if name in changes]
    sets.append("updated_at = now()")
    return await conn.fetchrow(
        f"UPDATE webhooks SET {', '.join(sets)} WHERE bank_id = {params.add(bank_id)}"
        f" AND id = {params.add(webhook_id)} RETURNING *",
        *params.values,
    )


async def delete_webhook(conn: Conn, bank_id: str, webhook_id: uuid.UUID) -> bool:
    result = await conn.execute("DELETE FROM webhooks WHERE bank_id = $1 AND id = $2", bank_id, webhook_id)
    return result != "DELETE 0"


async def subscribed(conn: Conn, bank_id: str, event_type: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id, url FROM webhooks WHERE bank_id = $1 AND enabled AND $2 = ANY(event_types)", bank_id, event_type
    )


async def add_deliveries(conn: Conn, bank_id: str, event_id: uuid.UUID, event_type: str, body: str,
                         targets: list[asyncpg.Record]) -> None:
    await conn.executemany(
        "INSERT INTO webhook_deliveries (id, webhook_id, bank_id, event_id, event_type, url, body)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        [(uuid.uuid4(), t["id"], bank_id, event_id, event_type, t["url"], body) for t in targets],
    )


async def claim_due(conn: Conn, limit: int, hold_seconds: float) -> list[asyncpg.Record]:
    """Due pending deliveries, held for `hold_seconds` so no other sender takes them meanwhile."""
    return await conn.fetch(
        """
        WITH due AS (
            SELECT id FROM webhook_deliveries
            WHERE status = 'pending' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now())
            ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
        )
        UPDATE webhook_deliveries d SET locked_until = now() + make_interval(secs => $2)
        FROM due, webhooks w WHERE d.id = due.id AND w.id = d.webhook_id
        RETURNING d.*, w.secret, w.http_config
        """,
        limit, hold_seconds,
    )


async def record_attempt(conn: Conn, delivery_id: uuid.UUID, *, status: str, next_attempt_at: datetime | None,
                         error: str | None, response_status: int | None, response_body: str | None,
                         latency_ms: float | None) -> None:
    await conn.execute(
        """
        UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1,
               next_attempt_at = coalesce($3, next_attempt_at), locked_until = NULL, last_error = $4,
               last_response_status = $5, last_response_body = $6, last_latency_ms = $7,
               last_attempt_at = now(), updated_at = now()
        WHERE id = $1
        """,
        delivery_id, status, next_attempt_at, error, response_status, response_body, latency_ms,
    )


async def list_deliveries(conn: Conn, webhook_id: uuid.UUID, limit: int,
                          before: tuple[datetime, uuid.UUID] | None) -> list[asyncpg.Record]:
    """Newest first; `before` is the (created_at, id) of the last row of the previous page."""
    return await conn.fetch(
        """
        SELECT * FROM webhook_deliveries
        WHERE webhook_id = $1 AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $2
        """,
        webhook_id, limit, before[0] if before else None, before[1] if before else None,
    )
