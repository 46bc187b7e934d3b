"""What the store does for recall's query plans: every pooled connection keeps the vector search
settings and compiles nothing with JIT, and a bulk retain leaves fresh planner statistics and
compacted per-word counts behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid

import asyncpg
import pytest

from engram import Memory
from engram.settings import Settings
from engram.store.keyword_frequencies import facts_of_types
from engram.store.pool import open_store
from engram.store.statistics import ANALYZED_TABLES, analyze_if_stale

TYPES = ["world", "experience", "observation"]


async def settings_on_each_pooled_use(dsn: str, names: tuple[str, ...], uses: int = 3) -> list[dict[str, str]]:
    """`SHOW` of each setting in `names` on every use of a one-connection pool: its first use, and the
    uses after the pool's release. A vector expression first, so pgvector's settings exist."""
    store = await open_store(Settings(database_url=dsn), min_size=1, max_size=1)
    try:
        shown = []
        for _ in range(uses):
            async with store.pool.acquire() as conn:
                await conn.fetchval("SELECT '[1,2]'::vector <=> '[2,1]'::vector")
                shown.append({name: await conn.fetchval(f"SHOW {name}") for name in names})
        return shown
    finally:
        await store.close()


async def test_filtered_vector_searches_keep_scanning_on_every_pooled_connection(isolated_dsn: str) -> None:
    # Without iterative scans, a search in one bank stops after 40 candidates of all banks: a bank
    # among others got a fraction of its nearest facts.
    for shown in await settings_on_each_pooled_use(isolated_dsn, ("hnsw.iterative_scan", "hnsw.ef_search")):
        assert shown == {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "100"}


async def test_no_pooled_connection_compiles_statements_with_jit(isolated_dsn: str) -> None:
    # On a PostgreSQL built with LLVM, the graph arm's statement at 100,000 memories (costed ~816,000)
    # would be compiled with inlining and optimisation first: ~470 ms instead of 8 (store/pool.py). The
    # embedded PostgreSQL has no JIT provider, so the session's setting is what is checked.
    for shown in await settings_on_each_pooled_use(isolated_dsn, ("jit",)):
        assert shown == {"jit": "off"}


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


async def last_analyze(dsn: str, table: str = "memory_units") -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = $1", table)
    finally:
        await conn.close()


async def all_visible_share(dsn: str, table: str) -> float:
    """The share of the table's pages its visibility map marks all-visible (as of its last VACUUM)."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(  # type: ignore[no-any-return]
            "SELECT relallvisible::float8 / greatest(relpages, 1) FROM pg_class WHERE relname = $1", table)
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
        # The keyword arm's postings: planned with statistics, and read by index-only scans that skip
        # the table's pages only once a VACUUM has marked them all-visible.
        assert await last_analyze(isolated_dsn, "keyword_postings") is not None
        assert await all_visible_share(isolated_dsn, "keyword_postings") == 1.0
        # And the graph arm's walk from entities to the facts naming them (migration 026's index).
        assert await all_visible_share(isolated_dsn, "unit_entities") == 1.0
        memory.retain("stats", "One more fact about basil.")
        assert await last_analyze(isolated_dsn) == analysed
        # 55 new rows: over the base threshold (50) but under 50 + 10 % of the 121 rows there
        memory.retain_batch("stats", [{"content": f"Note {n} is about peppers in pot {n}."} for n in range(55)])
        assert await last_analyze(isolated_dsn) == analysed, "a bulk retain below 50 + 10 % does not reanalyse"
    finally:
        memory.close()


async def test_a_bulk_retain_compacts_the_per_word_counts_it_finds_piled_up_and_vacuums_them(isolated_dsn: str) -> None:
    # Every write appends delta rows to keyword_frequencies; left to recall, a bulk ingest's pile was
    # compacted by the first recall and its deleted rows read by every recall until autovacuum came.
    memory = Memory(database_url=isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        memory.retain("words", "Lena potted the first basil seedlings.")
        for table in ("memory_units", "keyword_frequencies"):  # only the job analyses and vacuums them
            await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        for n in range(40):
            memory.retain("words", f"Lena potted {n} more basil seedlings.")
        facts, rows = await facts_of_types(conn, "words", TYPES)
        assert (facts, rows) == (41, 41), "one totals row a retain: 41 rows to sum"
        memory.retain_batch("words", [{"content": f"Lena watered tray {n} of basil."} for n in range(60)])
        assert await facts_of_types(conn, "words", TYPES) == (101, 1), "compacted to one row, the count kept"
        kept = await conn.fetch("SELECT lexeme, facts FROM keyword_frequencies WHERE bank_id = 'words' ORDER BY 1")
        true = await conn.fetch("SELECT w.lexeme, count(*) AS facts FROM memory_units m, unnest(m.search) w"
                                " WHERE bank_id = 'words' GROUP BY 1 UNION ALL SELECT '', count(*)"
                                " FROM memory_units WHERE bank_id = 'words' ORDER BY 1")
        assert [tuple(r) for r in kept] == [tuple(r) for r in true], "one row a word, each its exact count"
        assert await all_visible_share(isolated_dsn, "keyword_frequencies") == 1.0, "the deleted rows vacuumed"
    finally:
        await conn.close()
        memory.close()


async def test_a_failed_compaction_leaves_the_bulk_retain_acknowledged_and_its_counts_exact(
    isolated_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    memory = Memory(database_url=isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        memory.retain("refused", "Omar tuned the first cello.")
        await conn.execute("ALTER TABLE memory_units SET (autovacuum_enabled = off)")
        await conn.execute(
            "CREATE FUNCTION refuse_deletes() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'deletes refused for the test'; END $$;"
            " CREATE TRIGGER refuse_deletes BEFORE DELETE ON keyword_frequencies"
            " FOR EACH STATEMENT EXECUTE FUNCTION refuse_deletes()")
        for n in range(40):
            memory.retain("refused", f"Omar tuned cello number {n}.")
        _, piled = await facts_of_types(conn, "refused", TYPES)
        with caplog.at_level(logging.WARNING, logger="engram.store"):
            memory.retain_batch("refused", [{"content": f"Omar restrung viola {n}."} for n in range(60)])
        assert "compacting the keyword frequencies of bank refused failed" in caplog.text
        assert await last_analyze(isolated_dsn) is not None, "the job went on to analyse"
        facts, rows = await facts_of_types(conn, "refused", TYPES)
        assert facts == 101 and rows > piled, "every fact counted, no row taken away"
    finally:
        await conn.close()
        memory.close()


def index_searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The `per_unit` of each semantic-link search that goes through the HNSW index, as they happen."""
    from engram.store import facts_write

    asked: list[int] = []
    real = facts_write.hnsw_link_settings

    def settings(per_unit: int) -> str:
        asked.append(per_unit)
        return real(per_unit)

    monkeypatch.setattr(facts_write, "hnsw_link_settings", settings)
    return asked


async def test_a_small_bank_alone_is_searched_exactly_without_the_index_settings(
    isolated_dsn: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small bank alone in its table (a server holding one bank) is searched exactly as well, in a
    sync retain and in a bulk one beside the transaction: the HNSW index would find its facts as fast,
    but needs the planner's settings around the search, two more round trips of the retain."""
    from engram.store import facts_write

    asked = index_searches(monkeypatch)
    memory = Memory(database_url=isolated_dsn)
    try:
        memory.retain("alone", "The red kayak is kept in the boathouse by the lake.")
        memory.retain_batch("alone", [{"content": f"Parcel {n} left the depot in Leeds on a Tuesday."}
                                      for n in range(60)])  # a bulk retain: searched beside its transaction
        conn = await asyncpg.connect(isolated_dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM memory_links WHERE link_type = 'semantic'") > 0
        finally:
            await conn.close()
    finally:
        memory.close()
    assert asked == [], "no search went through the index"
    assert not facts_write.links_searched_exactly(facts_write.EXACT_LINKS_MAX_FACTS + 1)


async def test_a_bank_past_the_exact_search_threshold_has_its_links_searched_through_the_index(
    isolated_dsn: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The choice between the exact and the indexed search follows the bank's facts, counted with the
    ones the retain itself writes: up to the threshold exact, the first retain past it through the
    index (the threshold lowered to 30 here)."""
    from engram.store import facts_write

    asked = index_searches(monkeypatch)
    monkeypatch.setattr(facts_write, "EXACT_LINKS_MAX_FACTS", 30)
    memory = Memory(database_url=isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        memory.retain_batch("growing", [{"content": f"Parcel {n} left the depot in Leeds on a Tuesday."}
                                        for n in range(29)])
        memory.retain("growing", "Parcel 29 left the depot in Leeds on a Tuesday.")
        assert (await facts_of_types(conn, "growing", TYPES))[0] == 30 and asked == [], "30 facts: exact"
        memory.retain("growing", "Parcel 30 left the depot in Leeds on a Tuesday.")
        assert asked == [50], "31 facts with the retain's own: through the index"
        assert await conn.fetchval("SELECT count(*) FROM memory_links WHERE bank_id = 'growing'"
                                   " AND link_type = 'semantic' AND from_unit = (SELECT id FROM memory_units"
                                   " WHERE bank_id = 'growing' AND text LIKE 'Parcel 30 %')") > 0
    finally:
        await conn.close()
        memory.close()


async def test_a_small_bank_beside_larger_ones_gets_its_exact_nearest_facts_as_links(isolated_dsn: str) -> None:
    """A small bank is searched exactly for its semantic links (beside larger ones the HNSW index,
    filtered to it, would walk the other banks' vectors first): every new fact is linked to each of its
    bank's other facts that is at least 0.7 alike, the most alike first, up to 50."""
    import numpy as np

    from engram.store import facts_write
    from engram.store.pool import decode_text_vector

    memory = Memory(database_url=isolated_dsn)
    try:
        memory.retain_batch("large", [{"content": f"Parcel {n} left the depot in Leeds on a Tuesday."}
                                      for n in range(40)])
        conn = await asyncpg.connect(isolated_dsn)
        try:
            assert facts_write.links_searched_exactly(6), "the small bank takes the exact search"
            memory.retain_batch("small", [{"content": text} for text in (
                "The red kayak is kept in the boathouse by the lake.",
                "The red canoe is kept in the boathouse by the lake.",
                "The blue kayak is kept in the shed by the river.",
                "Our red kayak stays in the lake's boathouse.",
                "Grandma bakes rye bread every Sunday morning.",
                "The kayak paddles hang in the boathouse.",
            )])
            rows = await conn.fetch("SELECT id, embedding::text AS e FROM memory_units WHERE bank_id = 'small'")
            links = await conn.fetch("SELECT from_unit, to_unit FROM memory_links"
                                     " WHERE bank_id = 'small' AND link_type = 'semantic'")
        finally:
            await conn.close()
    finally:
        memory.close()
    vectors = {row["id"]: decode_text_vector(row["e"]).astype(np.float64) for row in rows}
    expected = set()
    for unit, vector in vectors.items():
        for other, other_vector in vectors.items():
            similarity = float(vector @ other_vector / np.linalg.norm(vector) / np.linalg.norm(other_vector))
            if other != unit and similarity >= 0.7:
                expected.add((unit, other))
    found = {(row["from_unit"], row["to_unit"]) for row in links}
    assert len(expected) >= 4, "the kayak facts are alike"
    assert found == expected


async def rows_in_analyze_sample(conn: asyncpg.Connection, table: str) -> int:
    """How many rows `ANALYZE table` sampled, from its VERBOSE report ("... N rows in sample ...")."""
    reports: list[str] = []

    def keep(_conn: object, message: object) -> None:
        reports.append(str(message))

    conn.add_log_listener(keep)
    try:
        await conn.execute(f"ANALYZE VERBOSE {table}")
    finally:
        conn.remove_log_listener(keep)
    found = [int(m.group(1)) for r in reports if (m := re.search(r"(\d+) rows in sample", r))]
    assert len(found) == 1, reports
    return found[0]


async def test_memory_links_are_analysed_from_a_sample_of_9000_links(isolated_dsn: str) -> None:
    # The statistics job's longest step was memory_links' default 30,000-row sample (migration 028);
    # its statistics only size recall's per-fact link lookups.
    memory = Memory(database_url=isolated_dsn)
    try:
        memory.retain_batch("sampled", [{"content": f"Ravi planted {n} tulips in the park."} for n in range(120)])
    finally:
        memory.close()
    conn = await asyncpg.connect(isolated_dsn)
    try:
        # Causal links between every pair of facts (~14,000) beside the retain's own.
        await conn.execute("INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)"
                           " SELECT a.id, b.id, 'sampled', 'causal', 0.5 FROM memory_units a, memory_units b"
                           " WHERE a.id <> b.id ON CONFLICT DO NOTHING")
        assert await conn.fetchval("SELECT count(*) FROM memory_links") > 12_000
        assert await rows_in_analyze_sample(conn, "memory_links") == 9_000
        assert await rows_in_analyze_sample(conn, "memory_units") == 120, "other tables keep their samples"
    finally:
        await conn.close()


async def stale_facts(dsn: str, bank: str, sentence: str) -> None:
    """80 facts in two retains under the job's 50 facts, so memory_units is left stale and unanalysed;
    autovacuum is kept off the table, so it cannot analyse it first."""
    memory = Memory(database_url=dsn)
    try:
        memory.retain_batch(bank, [{"content": sentence.format(f"0-{n}")} for n in range(40)])
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("ALTER TABLE memory_units SET (autovacuum_enabled = off)")
        finally:
            await conn.close()
        memory.retain_batch(bank, [{"content": sentence.format(f"1-{n}")} for n in range(40)])
    finally:
        memory.close()


async def analysed_at(conn: asyncpg.Connection, table: str) -> object:
    return await conn.fetchval("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = $1", table)


async def test_the_statistics_job_analyses_memory_units_beside_the_other_tables(isolated_dsn: str) -> None:
    # A bulk retain's caller waits for the job: memory_units on one connection, the other tables on a
    # second one at once. Held up on memory_units, the job still analyses the rest meanwhile.
    await stale_facts(isolated_dsn, "held", "Mina sorted {} jars of plum jam.")
    store = await open_store(Settings(database_url=isolated_dsn), min_size=2, max_size=2)
    holder, observer = await asyncpg.connect(isolated_dsn), await asyncpg.connect(isolated_dsn)
    job = None
    try:
        others = ("memory_links", "unit_entities", "entities", "keyword_postings")  # the ones with rows
        before = {table: await analysed_at(observer, table) for table in (*others, "memory_units")}
        assert before["memory_units"] is None
        held = holder.transaction()
        await held.start()
        await holder.execute("LOCK TABLE memory_units IN SHARE UPDATE EXCLUSIVE MODE")  # what ANALYZE takes
        job = asyncio.create_task(analyze_if_stale(store.pool))

        async def analysed_since() -> set[str]:
            return {table for table in others if await analysed_at(observer, table) != before[table]}

        for _ in range(200):
            if await analysed_since() == set(others):
                break
            await asyncio.sleep(0.05)
        assert await analysed_since() == set(others), "the other tables went on meanwhile"
        assert not job.done(), "memory_units is still held up"
        assert await analysed_at(observer, "memory_units") is None
        await held.rollback()
        assert await asyncio.wait_for(job, 30) is True
        assert await analysed_at(observer, "memory_units") is not None
        assert store.pool.get_idle_size() == 2, "both connections given back"
    finally:
        await holder.close()  # ends its transaction, should an assertion have failed while it held the lock
        if job is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(job, 30)
        await observer.close()
        await asyncio.wait_for(store.close(), 30)  # a connection never given back would hold it for ever


async def test_the_statistics_job_runs_whole_on_one_connection_when_the_pool_has_no_other(isolated_dsn: str) -> None:
    await stale_facts(isolated_dsn, "alone", "Ivo dried {} bunches of sage.")
    store = await open_store(Settings(database_url=isolated_dsn), min_size=1, max_size=1)
    try:
        assert await analyze_if_stale(store.pool) is True
        async with store.pool.acquire() as conn:
            for table in ANALYZED_TABLES:
                assert await analysed_at(conn, table) is not None, table
            assert await all_visible_share(isolated_dsn, "keyword_postings") == 1.0
    finally:
        await store.close()
