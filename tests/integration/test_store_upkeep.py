"""What the store does for recall's query plans: every pooled connection keeps the vector search
settings, and a bulk retain leaves fresh planner statistics behind."""

from __future__ import annotations

import uuid

import asyncpg

from engram import Memory
from engram.settings import Settings
from engram.store.pool import open_store


async def test_filtered_vector_searches_keep_scanning_on_every_pooled_connection(isolated_dsn: str) -> None:
    # Without iterative scans, a search in one bank stops after 40 candidates of all banks: a bank
    # among others got a fraction of its nearest facts.
    store = await open_store(Settings(database_url=isolated_dsn), min_size=1, max_size=1)
    try:
        for _ in range(3):  # the first use of a connection, and uses after the pool's RESET ALL
            async with store.pool.acquire() as conn:
                await conn.fetchval("SELECT '[1,2]'::vector <=> '[2,1]'::vector")
                assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"
                assert await conn.fetchval("SHOW hnsw.ef_search") == "100"
    finally:
        await store.close()


async def test_the_semantic_link_search_gives_back_the_session_search_settings(isolated_dsn: str) -> None:
    # It narrows the HNSW search (and turns sorting off) for its own statement only: the rest of the
    # retain's transaction, a recall among them, must search as every other statement does.
    from engram.store import facts_write

    store = await open_store(Settings(database_url=isolated_dsn), min_size=1, max_size=1)
    try:
        async with store.pool.acquire() as conn, conn.transaction():
            await facts_write.insert_semantic_links(conn, "no-such-bank", [uuid.uuid4()])
            assert await conn.fetchval("SHOW hnsw.ef_search") == "100"
            assert await conn.fetchval("SHOW enable_sort") == "on"
    finally:
        await store.close()


async def last_analyze(dsn: str) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'memory_units'")
    finally:
        await conn.close()


async def test_a_bulk_retain_leaves_fresh_statistics_and_a_small_one_does_not_reanalyse(isolated_dsn: str) -> None:
    memory = Memory(database_url=isolated_dsn)
    try:
        memory.retain("stats", "A first small fact about gardening.")
        assert await last_analyze(isolated_dsn) is None, "a handful of rows is below the threshold"
        memory.retain_batch("stats", [{"content": f"Fact {n} is about tomatoes in bed {n}."} for n in range(120)])
        analysed = await last_analyze(isolated_dsn)
        assert analysed is not None
        memory.retain("stats", "One more fact about basil.")
        assert await last_analyze(isolated_dsn) == analysed
        # 55 new rows: over the base threshold (50) but under 50 + 10 % of the 121 rows there
        memory.retain_batch("stats", [{"content": f"Note {n} is about peppers in pot {n}."} for n in range(55)])
        assert await last_analyze(isolated_dsn) == analysed, "a bulk retain below 50 + 10 % does not reanalyse"
    finally:
        memory.close()
