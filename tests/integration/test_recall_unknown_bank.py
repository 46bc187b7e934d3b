"""A bank PostgreSQL's statistics know nothing of: one that grew by small retains since the table
was last analysed (only bulk retains analyse it, and autovacuum waits for a tenth of the whole table
to change). The planner then expects a single row wherever the bank's condition applies, and a
statement it lets choose among the bank's indexes reads the whole bank for every row of another: at
3,000 facts a recall took 216 ms instead of 31 (`/tmp` probe, session 37). Recall's statements are
run here in a transaction and the index tuples they fetched counted; and a small retain into such a
bank has the tables analysed."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram import Memory
from engram.api.app import close_services, open_services
from engram.recall import arms, keyword_arm
from engram.recall.filters import UnitFilter
from engram.recall.rows import fetch_candidates
from engram.settings import Settings
from engram.store import statistics
from engram.store.migrate import apply_migrations
from engram.transfer import handlers
from engram.transfer.archive import read_archive
from engram.transfer.importer import ImportOptions, import_archive
from tests.support.plans import Recording

EMBEDDING = "[" + ",".join(["0.1"] * 384) + "]"
FACTS_PER_CHUNK = 3
WORDS = ["amber", "birch", "cedar", "delta", "ember"]
GROWN_CHUNKS = 500
SCOPE = UnitFilter(bank_id="grown", fact_types=["world", "experience", "observation"])


async def add_facts(conn: asyncpg.Connection, bank_id: str, chunks: int) -> None:
    """`chunks` documents of one chunk each, holding FACTS_PER_CHUNK facts: "<word> <bank> <chunk>.<n>"
    (the word one of WORDS, each in a fifth of the chunks), each after the first with the one before it
    as its lead-in (so the two are neighbours)."""
    await conn.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", bank_id)
    await conn.execute(
        "INSERT INTO documents (bank_id, id) SELECT $1, 'd' || c FROM generate_series(1, $2) c", bank_id, chunks)
    await conn.execute(
        "INSERT INTO chunks (id, bank_id, document_id, chunk_index, chunk_text, content_hash)"
        " SELECT $1 || '-c' || c, $1, 'd' || c, 0, 'text', 'hash' FROM generate_series(1, $2) c", bank_id, chunks)
    await conn.execute(
        "INSERT INTO memory_units (id, bank_id, document_id, chunk_id, text, lead_in, fact_type, embedding)"
        " SELECT gen_random_uuid(), $1, 'd' || c, $1 || '-c' || c, w || ' ' || $1 || ' ' || c || '.' || n,"
        "        CASE WHEN n > 1 THEN w || ' ' || $1 || ' ' || c || '.' || (n - 1) END, 'world', $3::vector"
        " FROM generate_series(1, $2) c, generate_series(1, $4) n, LATERAL (SELECT ($5::text[])[c % 5 + 1] w) w",
        bank_id, chunks, EMBEDDING, FACTS_PER_CHUNK, WORDS)


@pytest.fixture
async def stale_dsn(isolated_dsn: str) -> AsyncIterator[str]:
    """A database whose statistics were taken before the bank `grown` existed."""
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await apply_migrations(conn)
        await conn.execute("ALTER TABLE memory_units SET (autovacuum_enabled = off)")  # they stay stale
        await add_facts(conn, "old", 1000)
        await conn.execute("ANALYZE memory_units")
        await add_facts(conn, "grown", GROWN_CHUNKS)
    finally:
        await conn.close()
    yield isolated_dsn


@pytest.fixture
async def stale(stale_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(stale_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def facts_fetched(conn: asyncpg.Connection) -> int:
    """The memory_units rows fetched through the table's indexes (counted per index) by this connection
    since it last reported its statistics."""
    return await conn.fetchval(
        "SELECT sum(pg_stat_get_xact_tuples_fetched(indexrelid)) FROM pg_index"
        " WHERE indrelid = 'memory_units'::regclass")


async def test_each_facts_neighbours_are_looked_up_in_its_chunk_whatever_the_statistics(
    stale: asyncpg.Connection,
) -> None:
    """The neighbours of a recall's hundred best facts, fetched with the candidates: with the scope's
    bank condition inside the join, every fact of the bank was fetched for each of them."""
    rows = await stale.fetch(
        "SELECT id, text FROM memory_units WHERE bank_id = 'grown' AND text LIKE '% %.2' ORDER BY text LIMIT 100")
    async with stale.transaction():
        before = await facts_fetched(stale)
        candidates, found = await fetch_candidates(  # a connection serves as the pool
            stale, SCOPE, [], EMBEDDING, neighbours_of=[row["id"] for row in rows])
        fetched = await facts_fetched(stale) - before
    # its document's facts for each fact (300 here) and the neighbours' rows (200), not the bank's
    # (151,500 before)
    assert fetched <= 8 * len(rows), f"{fetched} facts fetched for the neighbours of {len(rows)}"
    texts = {r["id"]: r["text"] for r in await stale.fetch("SELECT id, text FROM memory_units WHERE bank_id = 'grown'")}
    for row in rows:  # "grown c.2" sits between "grown c.1" and "grown c.3"
        stem = row["text"][: -len(".2")]
        assert sorted(texts[n] for n, _ in found[row["id"]]) == [f"{stem}.1", f"{stem}.3"]
        # the neighbours come as candidates too: their share may lift them among the results
        assert all(candidates[n]["text"] == texts[n] for n, _ in found[row["id"]])


async def test_the_graph_arm_checks_each_reached_fact_by_its_id_whatever_the_statistics(
    stale: asyncpg.Connection,
) -> None:
    """Ten seeds, each linked to ten facts the arm reaches and must hold to the scope one by one
    (`UnitFilter.holds`, which the temporal arm's linked facts go through as well): with the scope
    inside the lookup, every fact of the bank was fetched for each."""
    ids = [r["id"] for r in await stale.fetch(
        "SELECT id FROM memory_units WHERE bank_id = 'grown' ORDER BY text LIMIT 110")]
    seeds, reached = ids[:10], ids[10:]
    await stale.execute(
        "INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)"
        " SELECT s, r, 'grown', 'semantic', 0.9 FROM unnest($1::uuid[]) WITH ORDINALITY a(s, i),"
        " unnest($2::uuid[]) WITH ORDINALITY b(r, j) WHERE (j - 1) / 10 = i - 1", seeds, reached)
    async with stale.transaction():
        before = await facts_fetched(stale)
        found = await arms.graph(stale, SCOPE, [(seed, 0.9) for seed in seeds], 300)
        fetched = await facts_fetched(stale) - before
    assert sorted(unit for unit, _ in found) == sorted(reached)
    assert fetched <= 5 * len(reached), f"{fetched} facts fetched to check {len(reached)}"


def rows_joined_and_dropped(plan: dict[str, object]) -> int:
    """The rows an EXPLAIN ANALYZE (FORMAT JSON) plan's joins compared and dropped, all nodes summed."""
    dropped = int(plan.get("Rows Removed by Join Filter", 0)) * int(plan.get("Actual Loops", 1))  # type: ignore[call-overload]
    return dropped + sum(rows_joined_and_dropped(p) for p in plan.get("Plans", []))  # type: ignore[union-attr]


async def test_the_keyword_arm_scores_the_facts_it_read_without_a_loop_over_them_for_each_posting(
    stale: asyncpg.Connection,
) -> None:
    """Two words, each in a fifth of the bank's 1,500 facts: their postings were joined to the facts
    read as a loop over those facts for each posting (180,000 pairs compared here)."""
    recording = Recording(stale)
    found = await keyword_arm.keyword(recording, SCOPE, "amber birch", 1000, None)  # type: ignore[arg-type]
    assert len(found) == 2 * len(await stale.fetch(
        "SELECT 1 FROM memory_units WHERE bank_id = 'grown' AND text LIKE 'amber %'"))
    scoring = [(sql, args) for sql, args in recording.statements if "keyword_postings" in sql]
    assert scoring, "the arm read the postings"
    for sql, args in scoring:
        plan = json.loads(await stale.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args))[0]["Plan"]
        assert rows_joined_and_dropped(plan) < 1000, rows_joined_and_dropped(plan)


async def test_a_bank_the_planner_undercounts_gets_the_tables_analysed_once(stale_dsn: str) -> None:
    statistics._facts_when_analysed.pop("grown", None)  # noqa: SLF001 — another test's run in this process
    pool = await asyncpg.create_pool(stale_dsn, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            assert await statistics.planned_rows(conn, "grown") < 10, "the fixture's statistics are stale"
        assert await statistics.analyze_if_bank_undercounted(pool, "grown") is True
        async with pool.acquire() as conn:
            assert await statistics.planned_rows(conn, "grown") > 1000  # of 1,500
        assert await statistics.analyze_if_bank_undercounted(pool, "grown") is False, "known now"
        assert await statistics.analyze_if_bank_undercounted(pool, "old") is False, "known all along"
    finally:
        await pool.close()


async def test_a_small_retain_into_a_bank_the_planner_undercounts_has_the_tables_analysed(stale_dsn: str) -> None:
    """Through the in-process library's retain: the check runs after it, in the background."""
    statistics._facts_when_analysed.pop("grown", None)  # noqa: SLF001
    memory = Memory(database_url=stale_dsn)
    conn = await asyncpg.connect(stale_dsn)
    try:
        memory.retain("grown", "Amber grown one more fact.")
        for _ in range(100):
            if await statistics.planned_rows(conn, "grown") > 1000:
                break
            await asyncio.sleep(0.1)
        assert await statistics.planned_rows(conn, "grown") > 1000
    finally:
        await conn.close()
        memory.close()


async def test_a_restored_bank_is_known_to_the_planner_when_the_import_ends(stale_dsn: str) -> None:
    """A restore writes a whole bank in one transaction and no retain runs the statistics job: the
    import runs the small retains' check itself."""
    services = await open_services(Settings(database_url=stale_dsn, worker_enabled=False))
    conn = await asyncpg.connect(stale_dsn)
    try:
        with tempfile.TemporaryFile() as spool:  # the archive's documents are read from it as they go in
            await handlers.write_export(services, "grown", {}, spool)
            spool.seek(0)
            archive = read_archive(spool)
            await conn.execute("ANALYZE memory_units")  # the statistics know both banks there, not the next one
            assert (await import_archive(services, archive, ImportOptions("restored")))["facts_imported"] == 1500
        assert await statistics.planned_rows(conn, "restored") > 1000
    finally:
        await conn.close()
        await close_services(services)
