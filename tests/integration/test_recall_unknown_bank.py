"""Recall's statements in a bank PostgreSQL's statistics know nothing of: one that grew by small
retains since the table was last analysed (only bulk retains analyse it, and autovacuum waits for a
tenth of the whole table to change). The planner then expects a single row wherever the bank's
condition applies, and a statement it lets choose among the bank's indexes reads the whole bank for
every row of another: at 3,000 facts a recall took 216 ms instead of 31 (`/tmp` probe, session 37).
Each statement is run here in a transaction, and the index tuples it fetched are counted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.recall.filters import UnitFilter
from engram.recall.neighbours import fetch_neighbours
from engram.store.migrate import apply_migrations

EMBEDDING = "[" + ",".join(["0.1"] * 384) + "]"
FACTS_PER_CHUNK = 3
GROWN_CHUNKS = 500
SCOPE = UnitFilter(bank_id="grown", fact_types=["world", "experience", "observation"])


async def add_facts(conn: asyncpg.Connection, bank_id: str, chunks: int) -> None:
    """`chunks` documents of one chunk each, holding FACTS_PER_CHUNK facts: "<bank> <chunk>.<n>", each
    after the first with the one before it as its lead-in (so the two are neighbours)."""
    await conn.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", bank_id)
    await conn.execute(
        "INSERT INTO documents (bank_id, id) SELECT $1, 'd' || c FROM generate_series(1, $2) c", bank_id, chunks)
    await conn.execute(
        "INSERT INTO chunks (id, bank_id, document_id, chunk_index, chunk_text, content_hash)"
        " SELECT $1 || '-c' || c, $1, 'd' || c, 0, 'text', 'hash' FROM generate_series(1, $2) c", bank_id, chunks)
    await conn.execute(
        "INSERT INTO memory_units (id, bank_id, document_id, chunk_id, text, lead_in, fact_type, embedding)"
        " SELECT gen_random_uuid(), $1, 'd' || c, $1 || '-c' || c, $1 || ' ' || c || '.' || n,"
        "        CASE WHEN n > 1 THEN $1 || ' ' || c || '.' || (n - 1) END, 'world', $3::vector"
        " FROM generate_series(1, $2) c, generate_series(1, $4) n",
        bank_id, chunks, EMBEDDING, FACTS_PER_CHUNK)


@pytest.fixture
async def stale(isolated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to a database whose statistics were taken before the bank `grown` existed."""
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await apply_migrations(conn)
        await conn.execute("ALTER TABLE memory_units SET (autovacuum_enabled = off)")  # they stay stale
        await add_facts(conn, "old", 1000)
        await conn.execute("ANALYZE memory_units")
        await add_facts(conn, "grown", GROWN_CHUNKS)
        yield conn
    finally:
        await conn.close()


async def facts_fetched(conn: asyncpg.Connection) -> int:
    """The memory_units rows this transaction fetched through the table's indexes (counted per index)."""
    return await conn.fetchval(
        "SELECT sum(pg_stat_get_xact_tuples_fetched(indexrelid)) FROM pg_index"
        " WHERE indrelid = 'memory_units'::regclass")


async def test_each_facts_neighbours_are_looked_up_in_its_chunk_whatever_the_statistics(
    stale: asyncpg.Connection,
) -> None:
    """The neighbours of a recall's hundred best facts: with the scope's bank condition inside the join,
    every fact of the bank was fetched for each of them."""
    rows = await stale.fetch(
        "SELECT id, text FROM memory_units WHERE bank_id = 'grown' AND text LIKE '% %.2' ORDER BY text LIMIT 100")
    async with stale.transaction():
        found = await fetch_neighbours(stale, SCOPE, [row["id"] for row in rows])  # a connection serves as the pool
        fetched = await facts_fetched(stale)
    # a few of its document's facts a fact (1,800 here), not the bank (154,500 before)
    assert fetched <= 30 * len(rows), f"{fetched} facts fetched for the neighbours of {len(rows)}"
    texts = {r["id"]: r["text"] for r in await stale.fetch("SELECT id, text FROM memory_units WHERE bank_id = 'grown'")}
    for row in rows:  # "grown c.2" sits between "grown c.1" and "grown c.3"
        stem = row["text"][: -len(".2")]
        assert sorted(texts[n] for n, _ in found[row["id"]]) == [f"{stem}.1", f"{stem}.3"]
