"""The per-word fact counts of migration 022 and the postings of migration 024 stay exact through
every way facts change, and the keyword arm that reads them ranks exactly as BM25 over every fact
holding a query word, whether its plan leaves common words unread or not, or one pass reads every
posting of the query's words."""

from __future__ import annotations

import asyncio
import itertools
import math
import time

import asyncpg
import httpx
import pytest

from engram.recall import keyword_arm, keyword_plan
from engram.recall.filters import UnitFilter
from engram.store import keyword_frequencies

TYPES = ["world", "experience", "observation"]


async def kept_and_true_counts(dsn: str, bank_id: str) -> tuple[dict, dict]:
    """(the counts the table sums to, the counts memory_units holds), per (fact type, lexeme); lexeme
    '' is the totals: (facts, summed lengths)."""
    conn = await asyncpg.connect(dsn)
    try:
        kept = {(r["fact_type"], r["lexeme"]): (r["facts"], r["length"]) for r in await conn.fetch(
            "SELECT fact_type, lexeme, sum(facts) AS facts, sum(length) AS length FROM keyword_frequencies"
            " WHERE bank_id = $1 GROUP BY 1, 2 HAVING sum(facts) <> 0", bank_id)}
        true = {(r["fact_type"], r["lexeme"]): (r["facts"], r["length"]) for r in await conn.fetch(
            """
            SELECT fact_type, w.lexeme, count(*) AS facts, 0 AS length
            FROM memory_units m CROSS JOIN LATERAL unnest(m.search) w
            WHERE bank_id = $1 AND state = 'valid' GROUP BY 1, 2
            UNION ALL
            SELECT fact_type, '', count(*), sum(length(search)) FROM memory_units
            WHERE bank_id = $1 AND state = 'valid' GROUP BY 1
            """, bank_id)}
        return kept, true
    finally:
        await conn.close()


async def kept_and_true_postings(dsn: str, bank_id: str) -> tuple[set, set]:
    """(migration 024's postings of the bank, those its valid facts' vectors hold), as tuples of
    (lexeme, fact type, unit id, occurrences in the fact, in its lead-in, in its date, fact length)."""
    conn = await asyncpg.connect(dsn)
    try:
        kept = {tuple(r) for r in await conn.fetch(
            "SELECT lexeme, fact_type, unit_id, in_fact, in_lead_in, in_date, fact_length FROM keyword_postings"
            " WHERE bank_id = $1", bank_id)}
        true = set()
        for r in await conn.fetch(
                "SELECT w.lexeme, m.fact_type, m.id, w.weights, length(m.search) AS length FROM memory_units m"
                " CROSS JOIN LATERAL unnest(m.search) w WHERE m.bank_id = $1 AND m.state = 'valid'", bank_id):
            weights = list(r["weights"])
            true.add((r["lexeme"], r["fact_type"], r["id"], weights.count("A"), weights.count("B"),
                      weights.count("C"), r["length"]))
        return kept, true
    finally:
        await conn.close()


async def assert_counts_exact(dsn: str, bank_id: str) -> dict:
    """The bank's per-word counts, and its postings, are exactly those of its valid facts."""
    kept, true = await kept_and_true_counts(dsn, bank_id)
    assert kept == true
    kept_postings, true_postings = await kept_and_true_postings(dsn, bank_id)
    assert kept_postings == true_postings
    return kept


async def delta_rows(dsn: str, bank_id: str, lexemes: list[str]) -> int:
    """How many rows the bank's counts of these lexemes take ('' is the totals)."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(  # type: ignore[no-any-return]
            "SELECT count(*) FROM keyword_frequencies WHERE bank_id = $1 AND lexeme = ANY($2::text[])",
            bank_id, lexemes)
    finally:
        await conn.close()


def memory_ids(http: httpx.Client, bank_id: str) -> list[dict]:
    response = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"limit": 100})
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def test_the_counts_follow_every_change_of_the_facts(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    items = [{"content": f"Maria planted {n} tomato seedlings in the garden.", "document_id": f"doc-{n % 3}"}
             for n in range(9)] + [{"content": "John repaired the garden fence on Sunday.", "document_id": "fence"}]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    assert http.post(f"/v1/default/banks/{bank_id}/memories",
                     json={"items": [{"content": "Maria sold tomato chutney at the market."}]}).status_code == 200
    kept = await assert_counts_exact(pg_dsn, bank_id)
    assert kept[("world", "tomato")][0] >= 10 and kept[("world", "")][0] >= 11

    facts = memory_ids(http, bank_id)
    fence = next(f for f in facts if "fence" in f["text"])
    edits = [{"text": "John painted the fence blue."}, {"fact_type": "experience"}, {"state": "invalidated"},
             {"state": "valid"}]
    for edit in edits:  # new words, another type, out of and back into the valid facts
        response = http.patch(f"/v1/default/banks/{bank_id}/memories/{fence['id']}", json=edit)
        assert response.status_code == 200, response.text
        kept = await assert_counts_exact(pg_dsn, bank_id)
    assert ("experience", "paint") in kept and ("world", "fenc") not in kept

    assert http.delete(f"/v1/default/banks/{bank_id}/documents/doc-0").status_code == 200
    await assert_counts_exact(pg_dsn, bank_id)

    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            rows_before = await conn.fetchval("SELECT count(*) FROM keyword_frequencies WHERE bank_id = $1", bank_id)
            assert await keyword_frequencies.compact(pool, bank_id) < rows_before
            kept_after = await assert_counts_exact(pg_dsn, bank_id)
            rows_after = await conn.fetchval("SELECT count(*) FROM keyword_frequencies WHERE bank_id = $1", bank_id)
            assert rows_after == len(kept_after), "one row per fact type and word"

            assert http.delete(f"/v1/default/banks/{bank_id}/memories").status_code == 200
            assert await assert_counts_exact(pg_dsn, bank_id) == {}
            assert http.post(f"/v1/default/banks/{bank_id}/memories",
                             json={"items": [{"content": "Maria bought a tomato plant."}]}).status_code == 200
            assert http.delete(f"/v1/default/banks/{bank_id}").status_code == 200
            assert await conn.fetchval("SELECT count(*) FROM keyword_frequencies WHERE bank_id = $1", bank_id) == 0
    finally:
        await pool.close()
    # A bank made again under the same id starts from nothing.
    assert http.post(f"/v1/default/banks/{bank_id}/memories",
                     json={"items": [{"content": "Maria bought a tomato plant."}]}).status_code == 200
    kept = await assert_counts_exact(pg_dsn, bank_id)
    assert kept[("world", "tomato")] == (1, 0)
    # What migration 022 does for the facts written before it.
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("DELETE FROM keyword_frequencies WHERE bank_id = $1", bank_id)
        await conn.execute("SELECT rebuild_keyword_frequencies()")
        await conn.execute("DELETE FROM keyword_postings WHERE bank_id = $1", bank_id)
        await conn.execute("SELECT rebuild_keyword_postings()")  # migration 024's, likewise
    finally:
        await conn.close()
    assert await assert_counts_exact(pg_dsn, bank_id) == kept


def reference_bm25(facts: dict, words: dict[str, float], average_length: float) -> dict:
    """BM25 computed here from each fact's unnested vector: {id: score} of the facts holding a word."""
    scores = {}
    for unit_id, (length, lexemes) in facts.items():
        total = 0.0
        for lexeme, weights in lexemes.items():
            if lexeme in words:
                tf = (weights.count("A") + keyword_arm.LEAD_IN_WEIGHT * weights.count("B")
                      + keyword_arm.DATE_WEIGHT * weights.count("C"))
                total += words[lexeme] * keyword_plan.tf_factor(tf, length, average_length)
        if total > 0:
            scores[unit_id] = total
    return scores


COMMON = "garden"
SENTENCES = (
    [f"Maria watered the {COMMON} beds in row {n}." for n in range(60)]
    + [f"The {COMMON} tomato plants of plot {n} grew tall." for n in range(8)]
    + [f"Tomato soup recipe number {n} needs basil." for n in range(8)]
    + ["Maria and John talked about tomato blight and basil in the community garden for an hour."]
    + [f"John cycled to the office on day {n}." for n in range(100)]
    + [f"Kayak {COMMON} trip {n}." for n in range(12)]
    + [f"On a long windy afternoon near harbour wall {n} the walrus watchers counted seabirds, seals, gulls,"
       f" puffins, terns, cormorants and one lost heron." for n in range(6)]
    + ["The kayak club saw a walrus."]  # read in the first reading, and holding a word of the second
    # Puffin and lighthouse each weigh less than an otter fact; together more: the second reading of
    # "otter puffin lighthouse" takes only the facts holding both.
    + [f"Otter {n} swam." for n in range(4)]
    + [f"On the cliffs beyond the northern bay puffin {n} nested among rocks and grasses all summer."
       for n in range(5)]
    + [f"On the cliffs beyond the northern bay lighthouse {n} stood among rocks and grasses all winter."
       for n in range(5)]
    + ["The puffin by the lighthouse."]
)


QUERIES = ["tomato garden", "basil tomato garden", "garden", "tomato", "community garden blight", "walrus garden",
           "walrus kayak garden", "heron kayak", "otter puffin lighthouse"]


def recorded_readings(monkeypatch: pytest.MonkeyPatch) -> list[keyword_arm.FactsHolding]:
    """The facts each of the plan's scoring queries reads, as the arm runs them."""
    readings: list[keyword_arm.FactsHolding] = []
    real_score = keyword_arm.score

    async def counted_score(conn: asyncpg.Connection, scope: UnitFilter, plan: keyword_plan.KeywordPlan, n: int,
                            reading: keyword_arm.FactsHolding) -> list:
        readings.append(reading)
        return await real_score(conn, scope, plan, n, reading)

    monkeypatch.setattr(keyword_arm, "score", counted_score)
    return readings


async def retained_sentences(http: httpx.Client, bank_id: str, conn: asyncpg.Connection) -> dict:
    """SENTENCES retained into the bank; {id: (length, {lexeme: weights})} of its valid facts."""
    items = [{"content": text} for text in SENTENCES]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    facts: dict = {}
    for row in await conn.fetch(
        "SELECT m.id, length(m.search) AS length, w.lexeme, w.weights FROM memory_units m"
        " CROSS JOIN LATERAL unnest(m.search) w WHERE m.bank_id = $1 AND m.state = 'valid'", bank_id):
        facts.setdefault(row["id"], (row["length"], {}))[1][row["lexeme"]] = list(row["weights"])
    return facts


async def assert_ranks_as_bm25(conn: asyncpg.Connection, bank_id: str, facts: dict, query: str, limit: int) -> None:
    words = await keyword_frequencies.read_scope_words(conn, bank_id, TYPES, query)
    plan = keyword_plan.plan(words, limit)
    expected = reference_bm25(facts, plan.weights, plan.average_length)
    best = sorted(expected.items(), key=lambda item: (-round(item[1], 9), str(item[0])))[:limit]
    found = await keyword_arm.keyword(conn, UnitFilter(bank_id, TYPES), query, limit, None)
    assert [unit_id for unit_id, _ in found] == [unit_id for unit_id, _ in best], query
    assert all(math.isclose(a, b, abs_tol=1e-6) for (_, a), (_, b) in zip(found, best, strict=True))


@pytest.mark.parametrize("limit", [3, 10, 40])
async def test_the_planned_arm_ranks_as_bm25_over_every_matching_fact(
    http: httpx.Client, bank_id: str, pg_dsn: str, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_plan, "ONE_PASS_MAX_POSTINGS_PER_LOOKUP", 0)  # one pass would read this small bank
    readings = recorded_readings(monkeypatch)
    conn = await asyncpg.connect(pg_dsn)
    try:
        facts = await retained_sentences(http, bank_id, conn)
        skipped_any, passes, readings_of = False, {}, {}
        for query in QUERIES:
            words = await keyword_frequencies.read_scope_words(conn, bank_id, TYPES, query)
            skipped_any |= keyword_plan.plan(words, limit).skips
            readings.clear()
            await assert_ranks_as_bm25(conn, bank_id, facts, query, limit)
            passes[query], readings_of[query] = len(readings), list(readings)
        assert skipped_any == (limit < 40), "the common word goes unread when the rarer words fill the list"
        if limit == 3:
            # The walrus facts are long: their scores do not beat what kayak and garden could add, and
            # the second reading skips garden only; the tomato facts settle the list in one reading.
            assert passes["walrus kayak garden"] == 2 and passes["tomato garden"] == 1, passes
            holding = keyword_arm.FactsHolding
            assert readings_of["walrus kayak garden"] == [
                holding(any_of=["walrus"]), holding(combination=[("kayak",)], none_of=["walrus"])], "each fact once"
            assert readings_of["otter puffin lighthouse"] == [
                holding(any_of=["otter"]), holding(combination=[("lighthous", "puffin")], none_of=["otter"])]
    finally:
        await conn.close()


@pytest.mark.parametrize("merged_from", [0, 10**9], ids=["merged", "hashed"])
async def test_one_pass_over_every_posting_ranks_as_bm25_over_every_matching_fact(
    http: httpx.Client, bank_id: str, pg_dsn: str, merged_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every posting of the query's words read at once, each fact's parts summed as the merged scans
    # stream by (from MERGED_FROM_POSTINGS postings) or in a hash table (below): the plan never reads.
    monkeypatch.setattr(keyword_plan, "ONE_PASS_MAX_POSTINGS_PER_LOOKUP", 10**9)
    monkeypatch.setattr(keyword_arm, "MERGED_FROM_POSTINGS", merged_from)
    readings = recorded_readings(monkeypatch)
    conn = await asyncpg.connect(pg_dsn)
    try:
        facts = await retained_sentences(http, bank_id, conn)
        for query, limit in itertools.product(QUERIES, [3, 10, 40]):
            await assert_ranks_as_bm25(conn, bank_id, facts, query, limit)
        repeated = UnitFilter(bank_id, TYPES + TYPES[:1])  # a type named twice is scanned once
        assert (await keyword_arm.keyword(conn, repeated, "tomato garden", 10, None)
                == await keyword_arm.keyword(conn, UnitFilter(bank_id, TYPES), "tomato garden", 10, None))
        assert readings == [], "one pass, not the plan's readings"
        assert await conn.fetchval("SHOW enable_hashagg") == "on", "the setting ends with its transaction"
    finally:
        await conn.close()


async def test_a_second_reading_takes_the_facts_holding_every_word_of_one_of_its_combinations(
    http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    # Each combination is read as the facts holding all its words; the combinations' facts are joined,
    # and those holding a word read already are taken away.
    items = [{"content": text} for text in SENTENCES]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    combinations, read_already = [("basil", "tomato"), ("lighthous", "puffin")], ["blight"]
    conn = await asyncpg.connect(pg_dsn)
    try:
        lexemes_of = {}
        for row in await conn.fetch("SELECT id, tsvector_to_array(search) AS lexemes FROM memory_units"
                                    " WHERE bank_id = $1 AND state = 'valid'", bank_id):
            lexemes_of[row["id"]] = set(row["lexemes"])
        words = await keyword_frequencies.read_scope_words(
            conn, bank_id, TYPES, "tomato basil puffin lighthouse blight")
        plan = keyword_plan.plan(words, 100)
        reading = keyword_arm.FactsHolding(combination=combinations, none_of=read_already)
        found = await keyword_arm.score(conn, UnitFilter(bank_id, TYPES), plan, 100, reading)
        no_combination = keyword_arm.FactsHolding(none_of=read_already)
        assert await keyword_arm.score(conn, UnitFilter(bank_id, TYPES), plan, 100, no_combination) == []
    finally:
        await conn.close()
    expected = {unit_id for unit_id, lexemes in lexemes_of.items()
                if any(set(combination) <= lexemes for combination in combinations)
                and not lexemes & set(read_already)}
    assert len(expected) == 9, "eight soup recipes and the puffin by the lighthouse"
    assert {unit_id for unit_id, _ in found} == expected


def test_a_recall_compacts_the_counts_once_they_pile_up(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    # Every retain appends its own rows; a recall summing many for its scope's totals compacts the bank
    # behind it.
    for n in range(40):
        response = http.post(f"/v1/default/banks/{bank_id}/memories",
                             json={"items": [{"content": f"Maria picked tomato number {n}."}]})
        assert response.status_code == 200, response.text

    assert asyncio.run(delta_rows(pg_dsn, bank_id, ["tomato", ""])) >= 80
    assert http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "tomato"}).status_code == 200
    deadline = time.monotonic() + 10
    while asyncio.run(delta_rows(pg_dsn, bank_id, ["tomato", ""])) > 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert asyncio.run(delta_rows(pg_dsn, bank_id, ["tomato", ""])) == 2, "one row for the word and one for the totals"
    asyncio.run(assert_counts_exact(pg_dsn, bank_id))


async def test_concurrent_retains_of_one_bank_keep_exact_counts(server: object, bank_id: str, pg_dsn: str) -> None:
    # Each retain appends its own rows, so retains running together neither wait on a shared counter
    # nor lose an update; while they run, a recall's compaction may fold rows the others just wrote.
    from concurrent.futures import ThreadPoolExecutor

    def retain(n: int) -> None:
        with server.client() as http:  # type: ignore[attr-defined]
            for batch in range(8):
                items = [{"content": f"Worker {n} planted tomato {batch}-{k} beside the basil."} for k in range(3)]
                response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
                assert response.status_code == 200, response.text
                assert http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                                 json={"query": "tomato basil"}).status_code == 200

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(retain, range(6)))
    totals_rows = await delta_rows(pg_dsn, bank_id, [""])
    assert totals_rows < 48, "48 retains wrote totals rows, and compactions folded some meanwhile"
    kept = await assert_counts_exact(pg_dsn, bank_id)
    assert kept[("world", "tomato")][0] == 144
