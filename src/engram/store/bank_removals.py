"""How far a whole-bank clear or bank delete has gone (migration 031).

The delete runs in one transaction, so what it has done is invisible until it commits: ~20 s at
100,000 memories, ~30 min at 10 million, answered synchronously (as Hindsight's API does). Its
progress, facts deleted of the facts there were, is written to `bank_removals` on connections of the
pool's own as each chunk of facts goes, and read by `GET …/banks/{bank_id}/removal`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg

from engram.store.spare import report_beside
from engram.store.tx import Conn

# A row older than this is left from a server that died mid-delete (a chunk takes seconds).
STALE_SECONDS = 300

Progress = Callable[[int], Awaitable[None]]


@asynccontextmanager
async def removal_progress(
    pool: asyncpg.Pool, bank_id: str, action: str, fact_type: str | None = None
) -> AsyncIterator[Progress]:
    """Registers the removal with the number of facts it will delete, yields the callback the delete
    calls with the facts deleted so far, and removes the row when the block ends, however it ends."""
    total = await pool.fetchval(
        "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND ($2::text IS NULL OR fact_type = $2)",
        bank_id, fact_type,
    )
    await pool.execute(
        """INSERT INTO bank_removals (bank_id, action, fact_type, total) VALUES ($1, $2, $3, $4)
           ON CONFLICT (bank_id) DO UPDATE SET action = $2, fact_type = $3, done = 0, total = $4,
               started_at = now(), updated_at = now()""",
        bank_id, action, fact_type, total,
    )

    async def advance(done: int) -> None:
        await report_beside(pool, "UPDATE bank_removals SET done = $2, updated_at = now() WHERE bank_id = $1",
                            bank_id, done)

    try:
        yield advance
    finally:
        await pool.execute("DELETE FROM bank_removals WHERE bank_id = $1", bank_id)


async def removal_under_way(conn: Conn, bank_id: str) -> asyncpg.Record | None:
    """The bank's clear or delete under way (action, fact_type, done, total, started_at, updated_at)."""
    return await conn.fetchrow(
        "SELECT action, fact_type, done, total, started_at, updated_at FROM bank_removals"
        " WHERE bank_id = $1 AND updated_at > now() - make_interval(secs => $2)",
        bank_id, STALE_SECONDS,
    )
