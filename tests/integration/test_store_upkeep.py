"""What the store does for recall's query plans: every pooled connection keeps the vector search
settings, and a bulk retain leaves fresh planner statistics behind."""

from __future__ import annotations

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
    finally:
        memory.close()
