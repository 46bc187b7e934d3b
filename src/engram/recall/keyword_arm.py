"""The keyword arm: Okapi BM25 over the facts sharing a word with the query (PostgreSQL's English
stemming and stop words), best first.

A word of a fact's lead-in counts LEAD_IN_WEIGHT of one of the fact's own words, a word of its date
DATE_WEIGHT; a word in more than UBIQUITOUS_SHARE of the facts (and in more than one) scores nothing,
and a fact matching only such words is no candidate: they all tied at 0, so which of them filled the
list was chance (and a list of ties fused as all best).

A scope that is every valid fact of its types (no tag filter) takes its document frequencies, N and
average length from the counts migration 022 keeps and reads migration 024's postings, not the
facts: every posting of the query's words in one pass when that is the cheaper reading, else only
the facts of the words that can change its list (engram.recall.keyword_plan). A tag-filtered scope
counts them among its matching facts in the query itself (N is the facts in scope, the average
length that of the matching facts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import asyncpg

from engram.recall import keyword_plan
from engram.recall.arms import Ranked, fetch_ranking, rounded_score
from engram.recall.filters import UnitFilter
from engram.recall.keyword_plan import BM25_B, BM25_K1, UBIQUITOUS_SHARE, KeywordPlan
from engram.store import keyword_frequencies
from engram.store.sql import SqlParams

_WORD = re.compile(r"[A-Za-z0-9]+")
# How much a word of a fact's lead-in counts next to one of the fact itself.
LEAD_IN_WEIGHT = 0.5
# How much a word of the fact's date (its day, month name and year, indexed at weight C by migration
# 015) counts next to one of the fact itself: "in May 2023" finds the turns of May 2023's sessions,
# whose own words never say when they were said.
DATE_WEIGHT = 0.5
# From this many postings, one pass sums each fact's parts as the merged scans stream by rather than
# in a hash table (`score_every_posting`). At 5,000 facts (~500-1,000 postings a question) the hash
# table without the setting's transaction took 2.2-2.5 ms against 2.8-3.1 with it.
MERGED_FROM_POSTINGS = 3_000


def keyword_query(text: str) -> str | None:
    """An OR of the query's words for to_tsquery (stemming and stop words are PostgreSQL's)."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return " | ".join(words) if words else None


def _term_frequency(params: SqlParams) -> str:
    """The weighted occurrences of an unnested lexeme `u`: its weights list one letter per occurrence,
    A in the fact, B in its lead-in, C in its date."""
    lead, dated = params.add(LEAD_IN_WEIGHT), params.add(DATE_WEIGHT)
    return (f"cardinality(array_positions(u.weights, 'A'))"
            f" + {lead}::float8 * cardinality(array_positions(u.weights, 'B'))"
            f" + {dated}::float8 * cardinality(array_positions(u.weights, 'C'))")


def _posting_tf(params: SqlParams) -> str:
    """A posting's weighted term frequency: its occurrences in the fact, in its lead-in and in its date."""
    lead, dated = params.add(LEAD_IN_WEIGHT), params.add(DATE_WEIGHT)
    return f"in_fact + {lead}::float8 * in_lead_in + {dated}::float8 * in_date"


def _bm25_part(weight: str, tf: str, length: str, average_length: str) -> str:
    """One word's part of a fact's BM25 score, in float arithmetic (B times an integer length was a
    numeric product, as exact and slower)."""
    return (f"{weight} * {tf} * {BM25_K1 + 1}::float8 / ({tf} + {BM25_K1}::float8 * (1::float8 - {BM25_B}::float8"
            f" + {BM25_B}::float8 * {length} / {average_length}))")


def _bm25(weight: str, average_length: str) -> str:
    return rounded_score(f"sum({_bm25_part(weight, 'h.tf', 'h.doc_length', average_length)})")


async def keyword(
    conn: asyncpg.Connection, scope: UnitFilter, query: str, limit: int, min_rank: float | None,
    scope_size: int | None = None,
) -> Ranked:
    """The `limit` best facts by BM25. `scope_size`: the facts in scope, if known (a tag-filtered
    scope's N; never taken below the facts matched)."""
    if scope.sees_whole_fact_types():
        ranked = await _planned(conn, scope, query, limit)
    else:
        ranked = await _counted(conn, scope, query, limit, scope_size)
    return [(unit_id, rank) for unit_id, rank in ranked if min_rank is None or rank >= min_rank]


async def _planned(conn: asyncpg.Connection, scope: UnitFilter, query: str, limit: int) -> Ranked:
    words = await keyword_frequencies.read_scope_words(conn, scope.bank_id, scope.fact_types, query)
    plan = keyword_plan.plan(words, limit)
    if not plan.weights:
        return []
    if plan.reads_every_posting(len(set(scope.fact_types))):
        return await score_every_posting(conn, scope, plan, limit)
    ranked = await score(conn, scope, plan, limit, FactsHolding(any_of=plan.read))
    scores = [rank for _, rank in ranked]
    if not plan.is_exact(scores, limit):
        # The facts of the words read are scored already: the second reading takes only those holding
        # none of them, and of those only the ones that can reach the list; the two lists merge (both
        # ordered as the query orders, by score then id).
        second = FactsHolding(combination=plan.combinations_to_read(scores, limit), none_of=plan.read)
        more = await score(conn, scope, plan, limit, second)
        ranked = sorted(ranked + more, key=lambda hit: (-hit[1], hit[0]))[:limit]
    return ranked


@dataclass(frozen=True)
class FactsHolding:
    """Which facts a reading scores: those holding one of `any_of`, or every word of one of
    `combination` (each a tuple of lexemes) and none of `none_of`."""

    any_of: list[str] = field(default_factory=list)
    combination: list[tuple[str, ...]] = field(default_factory=list)
    none_of: list[str] = field(default_factory=list)

    def unit_ids(self, params: SqlParams) -> str:
        """A query of the ids of these facts, from `postings` (the scope's postings of the plan's words)."""
        if self.any_of:
            return f"SELECT DISTINCT unit_id FROM postings WHERE lexeme = ANY({params.add(self.any_of)}::text[])"
        if not self.combination:
            return "SELECT NULL::uuid AS unit_id WHERE false"
        # The facts of a combination: the ids in the postings of each of its words, intersected. Counting
        # each fact's postings by combination in one grouping (one statement whatever the combinations)
        # hashed three columns for every posting read: 1.3 times as slow with one combination at
        # 100,000 facts, 3 times with 70, though planning the intersections then takes ~17 ms.
        combinations = " UNION ".join(
            "(" + " INTERSECT ".join(f"SELECT unit_id FROM postings WHERE lexeme = {params.add(lexeme)}::text"
                                     for lexeme in words) + ")"
            for words in self.combination)
        return f"""
            {combinations}
            EXCEPT
            SELECT unit_id FROM postings WHERE lexeme = ANY({params.add(self.none_of)}::text[])"""


async def score_every_posting(conn: asyncpg.Connection, scope: UnitFilter, plan: KeywordPlan, limit: int) -> Ranked:
    """BM25 of every fact in scope holding one of the plan's words, in one pass over their postings:
    a scan of each (word, fact type) in fact order, merged, each fact's parts summed as its postings
    go by. Summed in a hash table instead (the planner's choice: it guesses 200 facts for the merged
    scans) the statement took ~1.25 times as long at 100,000 facts, hence `enable_hashagg` off from
    MERGED_FROM_POSTINGS postings (below, the transaction that setting needs costs more than it saves)."""
    params = SqlParams()
    bank = params.add(scope.bank_id)
    average_length = params.add(plan.average_length)
    tf = f"({_posting_tf(params)})"
    fact_types = [params.add(fact_type) for fact_type in dict.fromkeys(scope.fact_types)]  # a repeat would count twice
    scans = []
    for lexeme, weight in plan.weights.items():
        word, part = params.add(lexeme), _bm25_part(f"{params.add(weight)}::float8", tf, "fact_length",
                                                    f"{average_length}::float8")
        scans += [f"""(SELECT unit_id, {part} AS part FROM keyword_postings
                       WHERE bank_id = {bank} AND lexeme = {word}::text AND fact_type = {fact_type}::text
                       ORDER BY unit_id)""" for fact_type in fact_types]
    merged = sum(plan.postings.values()) >= MERGED_FROM_POSTINGS
    # Each way has a text of its own: a plan PostgreSQL caches for a prepared statement is not made
    # again when a setting changes, so one cached with hashing allowed would serve the merged way too.
    statement = f"""
        SELECT unit_id AS id, {rounded_score("sum(part)")} AS rank
        FROM ({" UNION ALL ".join(scans)}) postings
        GROUP BY unit_id  -- {"summed in fact order" if merged else "summed in a hash table"}
        ORDER BY rank DESC, unit_id
        LIMIT {params.add(limit)}
        """
    if not merged:
        return await fetch_ranking(conn, statement, *params.values, score="rank")
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_hashagg = off")
        return await fetch_ranking(conn, statement, *params.values, score="rank")


async def score(
    conn: asyncpg.Connection, scope: UnitFilter, plan: KeywordPlan, limit: int, reading: FactsHolding
) -> Ranked:
    """BM25, over all the plan's words, of the facts of the scope the reading takes; the `limit` best.

    From migration 024's postings of the plan's words, read from their primary key alone: the facts'
    rows (and their text-search vectors) are never read."""
    params = SqlParams()
    bank, types = params.add(scope.bank_id), params.add(scope.fact_types)
    lexemes, weights = params.add(list(plan.weights)), params.add(list(plan.weights.values()))
    average_length = params.add(plan.average_length)
    return await fetch_ranking(
        conn,
        f"""
        WITH words AS MATERIALIZED (SELECT * FROM unnest({lexemes}::text[], {weights}::float8[]) AS w(lexeme, weight)),
        postings AS NOT MATERIALIZED (  -- each use its own index-only scan, of the words it needs
            SELECT * FROM keyword_postings
            WHERE bank_id = {bank} AND fact_type = ANY({types}::text[]) AND lexeme = ANY({lexemes}::text[])
        ),
        read AS MATERIALIZED ({reading.unit_ids(params)}),
        hits AS (  -- the facts read as an array in the scan's index condition, not a join the planner
                   -- could turn into a loop over them for each posting (as it did in a bank its
                   -- statistics did not know: postings times facts, 20 ms at 3,000 facts)
            SELECT unit_id AS id, lexeme, fact_length AS doc_length,
                   {_posting_tf(params)} AS tf
            FROM postings WHERE unit_id = ANY((SELECT array_agg(unit_id) FROM read)::uuid[])
        )
        SELECT h.id, {_bm25("w.weight", f"{average_length}::float8")} AS rank
        FROM hits h JOIN words w USING (lexeme)
        GROUP BY h.id
        ORDER BY rank DESC, h.id
        LIMIT {params.add(limit)}
        """,
        *params.values,
        score="rank",
    )


async def _counted(
    conn: asyncpg.Connection, scope: UnitFilter, query: str, limit: int, scope_size: int | None
) -> Ranked:
    """BM25 with document frequencies counted among the matching facts (every fact containing a query
    word is one), so one query computes exact IDF for any scope."""
    terms = keyword_query(query)
    if terms is None:
        return []
    params = SqlParams()
    tsquery = params.add(terms)
    text = params.add(query)
    where = scope.where(params)
    tf = _term_frequency(params)
    if scope_size is None:
        n = f"(SELECT count(*) FROM memory_units m WHERE {where})"
    else:
        n = f"greatest({params.add(scope_size)}::bigint, (SELECT count(*) FROM matched))"
    return await fetch_ranking(
        conn,
        f"""
        WITH query_terms AS MATERIALIZED (
            SELECT array_agg(DISTINCT lexeme) AS lexemes
            FROM unnest(tsvector_to_array(to_tsvector('english', {text}))) AS lexeme
        ),
        matched AS MATERIALIZED (
            SELECT m.id, m.search, length(m.search) AS doc_length
            FROM memory_units m
            WHERE {where} AND m.search @@ to_tsquery('english', {tsquery})
        ),
        hits AS (  -- the query's lexemes only, as in `score`
            SELECT c.id, c.doc_length, u.lexeme, {tf} AS tf
            FROM matched c CROSS JOIN query_terms q
            CROSS JOIN LATERAL unnest(ts_delete(c.search, tsvector_to_array(ts_delete(c.search, q.lexemes)))) u
        ),
        frequency AS (SELECT lexeme, count(*) AS df FROM hits GROUP BY lexeme),
        corpus AS MATERIALIZED (  -- counted once (inlined, each use of n would count the scope again)
            SELECT {n} AS n, (SELECT greatest(avg(doc_length), 1) FROM matched) AS average_length
        ),
        idf AS MATERIALIZED (  -- once per word: a numeric ln per matched fact was most of this query
            SELECT f.lexeme, CASE WHEN f.df > 1 AND f.df > k.n * {UBIQUITOUS_SHARE} THEN 0
                                  ELSE ln(1 + (k.n - f.df + 0.5) / (f.df + 0.5)) END AS weight
            FROM frequency f CROSS JOIN corpus k
        )
        SELECT id, rank FROM (
            SELECT h.id, {_bm25("w.weight", "k.average_length")} AS rank
            FROM hits h JOIN idf w USING (lexeme) CROSS JOIN corpus k
            GROUP BY h.id
        ) scored
        WHERE rank > 0  -- matching only words in over half the facts says nothing: no candidate
        ORDER BY rank DESC, id
        LIMIT {params.add(limit)}
        """,
        *params.values,
        score="rank",
    )
