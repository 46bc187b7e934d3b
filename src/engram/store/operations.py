"""Queries on `async_operations`, the durable queue of background work.

A worker claims a pending operation with FOR UPDATE SKIP LOCKED and holds it under a lease; an
operation whose worker died (lease expired while `processing`) is claimable again."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.errors import Conflict
from engram.store.spare import report_beside
from engram.store.storable import storable, storable_text
from engram.store.tx import Conn
from engram.store.writer_locks import bank_writers_free

# Queued (or re-queued) operations announce their id on this channel, in the statement that queues
# them: one round trip, and the notice goes out with the commit. Nothing in Engram listens; a process
# of one's own can, instead of polling.
_ANNOUNCED = "pg_notify('engram_operations', id::text) AS notified"


async def enqueue(
    conn: Conn,
    bank_id: str,
    operation_type: str,
    payload: dict[str, Any],
    *,
    operation_id: uuid.UUID | None = None,
    items_count: int = 0,
    document_id: str | None = None,
    dedupe_key: str | None = None,
) -> tuple[uuid.UUID, bool]:
    """Add an operation; returns (id, created). With a dedupe key, an operation of the same key still
    pending for the bank is returned instead.

    A caller-chosen `operation_id` is an idempotency key within the bank: the same request again
    (same bank, type and payload) returns the existing operation. Any other use of an id that exists
    — another request, or another bank — is a Conflict that does not say where the id is used, so a
    write is never acknowledged and dropped, and no bank learns about another's operations."""
    new_id = operation_id or uuid.uuid4()
    payload = storable(payload)
    row = await conn.fetchrow(
        f"""
        WITH added AS (
            INSERT INTO async_operations (id, bank_id, operation_type, payload, items_count, document_id, dedupe_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT DO NOTHING
            RETURNING id
        )
        SELECT id, {_ANNOUNCED} FROM added
        """,
        new_id,
        bank_id,
        operation_type,
        payload,
        items_count,
        document_id,
        dedupe_key,
    )
    if row is not None:
        return row["id"], True
    if operation_id is not None:
        same = await conn.fetchval(
            "SELECT bank_id = $2 AND operation_type = $3 AND payload = $4::jsonb FROM async_operations WHERE id = $1",
            operation_id, bank_id, operation_type, payload,
        )
        if same is True:
            return operation_id, False
        if same is False:
            raise Conflict(f"operation_id '{operation_id}' is already used by another operation; "
                           "send a new id (an id is reused only to repeat the same request)")
    existing = await conn.fetchval(
        """
        SELECT id FROM async_operations
        WHERE id = $1 OR (bank_id = $2 AND dedupe_key = $3 AND status = 'pending')
        ORDER BY (id = $1) DESC LIMIT 1
        """,
        new_id,
        bank_id,
        dedupe_key,
    )
    return existing, False


# The operations that write a bank's memories, and so wait for an import into it (`writer_locks`).
_BANK_WRITES = "'retain', 'file_retain', 'reprocess_document', 'consolidation'"
# The operations that import into a bank: the one in their payload (a clone's), else their own.
_IMPORTS = "'bank_import', 'bank_clone'"


async def claim_next(conn: Conn, worker_id: str, lease_seconds: float) -> asyncpg.Record | None:
    """The oldest operation a worker can run now, marked its own under a lease. Skipped: a second
    consolidation of a bank, and a write or another import into a bank an import holds (it runs once
    the import ends)."""
    return await conn.fetchrow(
        f"""
        UPDATE async_operations SET status = 'processing', worker_id = $1,
               lease_expires_at = now() + make_interval(secs => $2), started_at = coalesce(started_at, now()),
               updated_at = now()
        WHERE id = (
            SELECT id FROM async_operations a
            WHERE (status = 'pending' OR (status = 'processing' AND lease_expires_at < now()))
              -- One consolidation per bank at a time: two would both take the same unconsolidated facts.
              AND (operation_type <> 'consolidation' OR NOT EXISTS (
                    SELECT 1 FROM async_operations b
                    WHERE b.bank_id = a.bank_id AND b.operation_type = 'consolidation' AND b.id <> a.id
                      AND b.status = 'processing' AND b.lease_expires_at >= now()))
              -- Nothing that writes to a bank an import holds: it would wait in a worker slot for the import's end.
              AND CASE WHEN operation_type IN ({_BANK_WRITES}) THEN {bank_writers_free("a.bank_id")}
                       WHEN operation_type IN ({_IMPORTS})
                           THEN {bank_writers_free("coalesce(a.payload->>'target_bank_id', a.bank_id)")}
                       ELSE true END
            ORDER BY created_at
            FOR UPDATE SKIP LOCKED
            LIMIT 1
        )
        RETURNING *
        """,
        worker_id,
        lease_seconds,
    )


async def report_progress(
    pool: asyncpg.Pool, operation_id: uuid.UUID, progress: dict[str, Any], lease_seconds: float
) -> None:
    """Record progress and extend the lease (a worker that reports is alive), unless no pooled connection
    comes within a second (`report_beside`: the handler may hold a bank's locks that the pool's requests wait
    for); the next report, or the lease's keeper, makes up for a skipped one."""
    await report_beside(
        pool,
        """
        UPDATE async_operations SET progress = $2, lease_expires_at = now() + make_interval(secs => $3),
               updated_at = now()
        WHERE id = $1
        """,
        operation_id,
        storable(progress),
        lease_seconds,
    )


async def extend_lease(conn: Conn, operation_id: uuid.UUID, worker_id: str, lease_seconds: float) -> None:
    """Keep a claimed operation while its handler runs (however long an LLM call takes)."""
    await conn.execute(
        """
        UPDATE async_operations SET lease_expires_at = now() + make_interval(secs => $3)
        WHERE id = $1 AND worker_id = $2 AND status = 'processing'
        """,
        operation_id,
        worker_id,
        lease_seconds,
    )


# With a worker id, an outcome is recorded only while that worker still holds the operation: one that
# was frozen past its lease, while another worker took the operation over, records nothing when it
# resumes (the operation would otherwise complete twice and fire its webhook event twice).
_HELD_BY = "($3::text IS NULL OR (worker_id = $3 AND status = 'processing'))"


async def complete(conn: Conn, operation_id: uuid.UUID, result: dict[str, Any], worker_id: str | None = None) -> bool:
    """Mark the operation completed; False when `worker_id` no longer holds it (nothing changed)."""
    status = await conn.execute(
        f"""
        UPDATE async_operations SET status = 'completed', result = $2, error_message = NULL,
               completed_at = now(), updated_at = now(), lease_expires_at = NULL
        WHERE id = $1 AND {_HELD_BY}
        """,
        operation_id,
        storable(result),
        worker_id,
    )
    return status != "UPDATE 0"


async def fail(conn: Conn, operation_id: uuid.UUID, error: str, worker_id: str | None = None) -> bool:
    """Mark the operation failed; False when `worker_id` no longer holds it (nothing changed)."""
    status = await conn.execute(
        f"""
        UPDATE async_operations SET status = 'failed', error_message = $2, completed_at = now(),
               updated_at = now(), lease_expires_at = NULL
        WHERE id = $1 AND {_HELD_BY}
        """,
        operation_id,
        storable_text(error),
        worker_id,
    )
    return status != "UPDATE 0"


async def fail_imports_into(conn: Conn, bank_id: str) -> int:
    """Fail the unfinished imports and clones into `bank_id` that are filed under another bank (the
    deleted bank's own operations go with it), in the transaction that deletes `bank_id`. Claimed
    before the delete, such an import made the deleted bank again; failed, its worker's claim check
    (`writer_locks.check_claim`) stops it, and a retry of it imports into a new bank. Returns how many."""
    status = await conn.execute(
        f"""
        UPDATE async_operations SET status = 'failed', completed_at = now(), updated_at = now(),
               lease_expires_at = NULL,
               error_message = 'its target bank ' || $1 || ' was deleted before the import wrote to it'
        WHERE operation_type IN ({_IMPORTS}) AND payload->>'target_bank_id' = $1 AND bank_id <> $1
          AND status IN ('pending', 'processing')
        """,
        bank_id,
    )
    return int(status.split()[-1])


async def get(conn: Conn, bank_id: str, operation_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM async_operations WHERE bank_id = $1 AND id = $2", bank_id, operation_id
    )


async def list_for_bank(
    conn: Conn, bank_id: str, *, status: str | None, operation_type: str | None, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        """
        SELECT *, count(*) OVER () AS total FROM async_operations
        WHERE bank_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR operation_type = $3)
        ORDER BY created_at DESC LIMIT $4 OFFSET $5
        """,
        bank_id,
        status,
        operation_type,
        limit,
        offset,
    )
    total = rows[0]["total"] if rows else 0
    return rows, total


async def retry(conn: Conn, bank_id: str, operation_id: uuid.UUID) -> bool:
    """Put a failed or cancelled operation back in the queue."""
    row = await conn.fetchrow(
        f"""
        WITH retried AS (
            UPDATE async_operations SET status = 'pending', retry_count = retry_count + 1, error_message = NULL,
                   completed_at = NULL, worker_id = NULL, lease_expires_at = NULL, progress = NULL, updated_at = now()
            WHERE bank_id = $1 AND id = $2 AND status IN ('failed', 'cancelled')
            RETURNING id
        )
        SELECT id, {_ANNOUNCED} FROM retried
        """,
        bank_id,
        operation_id,
    )
    return row is not None


async def cancel(conn: Conn, bank_id: str, operation_id: uuid.UUID) -> bool:
    """Cancel an operation that has not started; one being processed runs to its end."""
    status = await conn.execute(
        """
        UPDATE async_operations SET status = 'cancelled', completed_at = now(), updated_at = now()
        WHERE bank_id = $1 AND id = $2 AND status = 'pending'
        """,
        bank_id,
        operation_id,
    )
    return status.endswith(" 1")


async def delete(conn: Conn, bank_id: str, operation_id: uuid.UUID) -> bool:
    status = await conn.execute(
        "DELETE FROM async_operations WHERE bank_id = $1 AND id = $2 AND status <> 'processing'",
        bank_id,
        operation_id,
    )
    return status.endswith(" 1")
