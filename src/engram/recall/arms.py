"""The retrieval arms. Each returns candidates best first as (unit id, arm score); each is one SQL
round trip. The keyword arm is engram.recall.keyword_arm."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from engram.recall import page_halves
from engram.recall.filters import UnitFilter
from engram.store.spare import each_when_free
from engram.store.sql import SqlParams
from engram.store.vector_index import indexed_distance

Ranked = list[tuple[uuid.UUID, float]]

SEMANTIC_MIN_SIMILARITY = 0.3
# With no floor from the caller, a query whose best hit is under SEMANTIC_MIN_SIMILARITY (a vague one:
# "What has everyone been working on?") still keeps the facts within this much of its best hit, so it
# gets the best available answers instead of none.
RELATIVE_SIMILARITY_SPAN = 0.1
GRAPH_SEEDS = 20
# Facts reached only through hub entities (a speaker named in every turn) score far below this; they
# would otherwise flood the fusion with weak matches.
GRAPH_MIN_ACTIVATION = 0.15
# A fact's time span as the index of migration 021 spells it (the planner matches it word for word):
# event dates, else when it was said; least/greatest keep it a valid range.
_SAID_START = "coalesce(m.occurred_start, m.mentioned_at)"
_SAID_END = "coalesce(m.occurred_end, m.occurred_start, m.mentioned_at)"
FACT_TIME_SPAN = f"tstzrange(least({_SAID_START}, {_SAID_END}), greatest({_SAID_START}, {_SAID_END}), '[]')"


# Up to this many facts in scope, the semantic arm computes every distance (a few milliseconds) instead
# of asking the HNSW index: an approximate search depends on the index's randomised graph, so two
# ingests of the same data (or one index before and after more writes) could return different
# neighbours. Larger scopes use the index, ordered by (distance, id): stable while the index is.
EXACT_SEARCH_MAX_FACTS = 10_000
# Scores are rounded to this many decimals before they are ordered: a sum over rows that PostgreSQL
# aggregates in no fixed order differs in its last bits from run to run, which reordered near-ties.
# They travel as float8: a numeric arrives as a Decimal, ~900 of them a recall.
SCORE_DECIMALS = 9


def rounded_score(expression: str) -> str:
    """SQL for a float8 `expression` rounded to SCORE_DECIMALS decimals, in float arithmetic. Through
    numeric (round(x::numeric, 9)::float8) each value's conversions cost ~1.1 µs: 3-4 ms of a keyword
    arm's statement scoring ~3,000 facts at 100,000 memories, a fifth of it."""
    scale = f"1e{SCORE_DECIMALS}::float8"
    return f"(round(({expression}) * {scale}) / {scale})"


def default_floor(best: float) -> float:
    """The similarity a fact needs when the caller set none: SEMANTIC_MIN_SIMILARITY, or less when even
    the best hit is below it (then a floor relative to the best)."""
    return min(SEMANTIC_MIN_SIMILARITY, best - RELATIVE_SIMILARITY_SPAN)


async def fetch_ranking(conn: asyncpg.Connection, sql: str, *args: Any, score: str = "score") -> Ranked:
    """The ranking `sql` selects (rows of `id` and `score`, best first), sent as one row of two arrays
    aggregated in the rows' order. Each row sent on its own is a message, a record, and two lookups by
    name and a float() in Python: ~1.5 times the decoding of the arrays (300 rows 0.23 against 0.16 ms
    of CPU), and a recall reads five or six rankings of up to 300 facts. (A plain aggregate over an
    ordered subquery takes its rows in that order; the arms' tests see any other.)"""
    row = await conn.fetchrow(
        f"SELECT array_agg(ranked.id) AS ids, array_agg(ranked.{score}::float8) AS scores FROM ({sql}) ranked",
        *args,
    )
    return list(zip(row["ids"] or (), row["scores"] or (), strict=True))


async def semantic(
    conn: asyncpg.Connection, scope: UnitFilter, query_vector: np.ndarray, limit: int,
    min_similarity: float | None, scope_size: int | None = None, spare: asyncpg.Connection | None = None,
) -> Ranked:
    """Facts by their best vector: their own, or that of one of their sentences (a long conversation
    turn is found by the sentence that answers, not diluted by the rest). Exact distances for scopes
    up to EXACT_SEARCH_MAX_FACTS, the HNSW index beyond; equal similarities are ordered by id.
    `min_similarity` None: `default_floor` of the best hit. `scope_size`: the facts in scope, if
    known (else counted here, up to the threshold).

    The facts' own vectors and their sentences' are searched by two statements, at once when `spare`
    (a second connection) is given: in a bank of conversation turns each is a good part of the arm's
    time (at the 4,124 facts and 10,586 sentences of the LoCoMo conversations, ~3 and ~11 ms), and
    the recall waits for this arm with little else running. An exact search of at least
    `page_halves.HALVES_MIN_FACTS` facts reads the facts' own vectors in two halves of the table
    (`engram.recall.page_halves`), so the three parts go to whichever of the two connections is free
    first: the sentences' part is long in a bank of conversation turns and empty in most others."""
    if spare is None:
        parts = [await semantic_side(conn, scope, query_vector, limit, side, scope_size) for side in SEMANTIC_SIDES]
    else:
        def search(side: str, half: page_halves.Half | None = None) -> Any:
            return lambda on: semantic_side(on, scope, query_vector, limit, side, scope_size, half)

        own, sentences = SEMANTIC_SIDES
        steps = [search(own), search(sentences)]
        if scope_size is not None and page_halves.HALVES_MIN_FACTS <= scope_size <= EXACT_SEARCH_MAX_FACTS:
            first, second = page_halves.halves(await page_halves.middle_page(conn))
            steps = [search(own, first), search(sentences), search(own, second)]
        parts = await each_when_free(conn, spare, steps)
    found = best_of_parts(parts, limit)
    if min_similarity is None:
        min_similarity = default_floor(found[0][1]) if found else 0.0
    return [(unit_id, similarity) for unit_id, similarity in found if similarity >= min_similarity]


# The tables whose vectors the semantic arm searches: the facts' own, and their sentences' (a fact
# whose turn has several sentences has a vector for each; its best one stands for it).
SEMANTIC_SIDES = ("memory_units", "memory_unit_sentences")
# The types a fact with sentence vectors can have (offline facts; an edit may switch between them).
SENTENCE_FACT_TYPES = frozenset({"world", "experience"})


def _sees_every_fact_with_sentences(scope: UnitFilter) -> bool:
    return scope.sees_whole_fact_types() and set(scope.fact_types) >= SENTENCE_FACT_TYPES


async def semantic_side(
    conn: asyncpg.Connection, scope: UnitFilter, query_vector: np.ndarray, limit: int, side: str,
    scope_size: int | None = None, half: page_halves.Half | None = None,
) -> Ranked:
    """The `limit` facts in scope most similar to the query by the vectors of `side` (one of
    SEMANTIC_SIDES), best first, each with its best similarity, rounded; no floor. `half`: only the
    facts in that half of the table (`page_halves.halves`; the facts' own vectors, searched exactly)."""
    params = SqlParams()
    vector = f"{params.add(query_vector)}::vector"
    where = scope.where(params)
    if half is not None:
        where += f" AND m.ctid {half[0]} {params.add(half[1])}::tid"
    limit_ref = params.add(limit)
    if scope_size is None:
        exact = f"(SELECT n FROM size) <= {EXACT_SEARCH_MAX_FACTS}"
        size = f"""size AS MATERIALIZED (  -- counted up to the threshold from the scope index's own pages
            SELECT count(*) AS n FROM (
                SELECT 1 FROM memory_units m WHERE {where} LIMIT {EXACT_SEARCH_MAX_FACTS + 1}) s
        ),"""
    else:
        exact, size = ("TRUE" if scope_size <= EXACT_SEARCH_MAX_FACTS else "FALSE"), ""
    if side == "memory_units":
        vectors, fact_id, rows_in_scope = "m.embedding", "m.id", "memory_units m"
        # OFFSET 0 keeps the distances computed for every row: ordered directly, the planner walks the
        # HNSW index.
        exact_search = f"""
            SELECT id, distance FROM (
                SELECT m.id, m.embedding <=> {vector} AS distance
                FROM memory_units m WHERE {where} AND {exact} OFFSET 0) d
            ORDER BY distance, id
            LIMIT {limit_ref}"""
    else:
        vectors, fact_id = "v.embedding", "v.unit_id"
        rows_in_scope = "memory_unit_sentences v JOIN memory_units m ON m.id = v.unit_id"
        if _sees_every_fact_with_sentences(scope):
            # The bank's sentences first, each fact's best, then the scope checked best first by one
            # primary-key lookup a fact until `limit` pass (all but invalidated facts pass). Joined
            # to their facts first, the facts' table was read and hashed whole for every search: 15.9
            # ms against 11.8 at the 10,586 sentences of the LoCoMo conversations' 4,124 facts.
            exact_search = f"""
            SELECT b.id, b.distance FROM (
                SELECT v.unit_id AS id, min(v.embedding <=> {vector}) AS distance
                FROM memory_unit_sentences v WHERE v.bank_id = {params.add(scope.bank_id)} AND {exact}
                GROUP BY v.unit_id
                ORDER BY distance, id OFFSET 0) b
            WHERE {scope.holds(params, "b.id")}
            ORDER BY b.distance, b.id
            LIMIT {limit_ref}"""
        else:
            # A scope narrowed by tags or types reads only its facts' sentences: checked best first,
            # the bank's sentences would walk past every fact outside it.
            exact_search = f"""
            SELECT id, min(distance) AS distance FROM (
                SELECT v.unit_id AS id, v.embedding <=> {vector} AS distance
                FROM {rows_in_scope} WHERE {where} AND {exact} OFFSET 0) s
            GROUP BY id
            ORDER BY distance, id
            LIMIT {limit_ref}"""
    return await fetch_ranking(
        conn,
        f"""
        WITH {size}
        -- The exact search cut to the `limit` best facts before the results are rounded and ordered:
        -- grouping every fact in scope (with the rounding) was half of the arm at 5,000 facts.
        exact AS MATERIALIZED ({exact_search}
        ),
        approximate AS (
            SELECT {fact_id} AS id, {vectors} <=> {vector} AS distance
            FROM {rows_in_scope} WHERE {where} AND NOT {exact}
            ORDER BY {indexed_distance(vectors, vector)}
            LIMIT {limit_ref}
        )
        SELECT id, {rounded_score('1 - min(distance)')} AS similarity
        FROM (SELECT * FROM exact UNION ALL SELECT * FROM approximate) hits
        GROUP BY id
        ORDER BY similarity DESC, id
        LIMIT {limit_ref}
        """,
        *params.values,
        score="similarity",
    )


def graph_seeds(semantic: Ranked) -> Ranked:
    """The semantic hits the graph arm spreads from: the best GRAPH_SEEDS, and those tied with the last
    (a cut among equals would pick by id)."""
    end = GRAPH_SEEDS
    while 0 < end < len(semantic) and semantic[end][1] == semantic[end - 1][1]:
        end += 1
    return semantic[:end]


async def graph(
    conn: asyncpg.Connection, scope: UnitFilter, seeds: Ranked, limit: int, spread_from: Ranked | None = None
) -> Ranked:
    """Spread activation from the best semantic hits (`graph_seeds` of `seeds`) to facts that share
    entities with them (tanh(0.5 · shared count); an entity in more than 4 facts counts 2/√mentions, so
    a hub like "user" does not connect everything) or that are linked to them (semantic / causal link
    weight); a fact's score is the best a seed gives it.

    `spread_from`: only these seeds spread (default: all of them), while every seed stays out of the
    results. A fact's score is a maximum over seeds, so the seeds can be split into parts computed on
    separate connections at once and their results joined by `best_of_parts`."""
    seeds = graph_seeds(seeds)
    spreading = seeds if spread_from is None else spread_from
    if not spreading:
        return []
    params = SqlParams()
    seed_ids = params.add([s[0] for s in seeds])
    spreading_ids = params.add([s[0] for s in spreading])
    seed_scores = params.add([s[1] for s in spreading])
    # The floor less a margin for the float sums' last bits: what may still reach the floor is walked,
    # and rounded and sorted below; the rounded scores then meet the floor itself.
    near_floor = params.add(GRAPH_MIN_ACTIVATION - 1e-6)
    return await fetch_ranking(
        conn,
        f"""
        WITH seeds AS (SELECT * FROM unnest({spreading_ids}::uuid[], {seed_scores}::real[]) AS s(id, sim)),
        -- A seed's lightest entities (hubs named in many facts) that even all together cannot lift a
        -- fact to the activation floor are not walked: a fact they alone reach scores below it and is
        -- dropped anyway. A hub in thousands of facts made this arm enumerate 100,000 rows for nothing.
        seed_entities AS MATERIALIZED (
            SELECT seed, sim, entity_id, w,
                   sim * tanh(0.5 * sum(w) OVER (PARTITION BY seed ORDER BY w, entity_id ROWS UNBOUNDED PRECEDING))
                       >= {near_floor} AS walked
            FROM (SELECT s.id AS seed, s.sim, ue.entity_id,
                         least(1.0, 2.0 / sqrt(greatest(e.mention_count, 1))) AS w
                  FROM seeds s
                  JOIN unit_entities ue ON ue.unit_id = s.id
                  JOIN entities e ON e.id = ue.entity_id) named
        ),
        walked_pairs AS MATERIALIZED (  -- (fact, seed, weight) once per walked entity they share; an
            SELECT ue.id, se.seed, se.sim, se.w  -- index-only scan per entity (OFFSET 0: never a hash of
                                                 -- them all; the index holds the fact: migration 026)
            FROM seed_entities se CROSS JOIN LATERAL (
                SELECT unit_id AS id FROM unit_entities ue WHERE ue.entity_id = se.entity_id OFFSET 0) ue
            WHERE se.walked AND ue.id <> ALL({seed_ids}::uuid[])
        ),
        -- A reached fact also gets the weight of the seed's unwalked entities it names. Those
        -- mentions are read in one index-only scan of the primary key, for the array of reached
        -- facts and the array of unwalked entities (a third of the reached facts' mentions at 5,000
        -- facts), then kept where the fact was reached from that seed (a seed's unwalked entities
        -- alone score under the floor, so the others change nothing but the grouping's size, ~20
        -- times as many rows). A primary-key probe per (fact, seed, unwalked entity) was ~13,000
        -- probes at 5,000 facts and a sixth of this arm's time, a lookup per reached fact ~10 % of it.
        reached_named AS MATERIALIZED (
            SELECT ue.unit_id AS id, ue.entity_id
            FROM unit_entities ue
            WHERE ue.unit_id = ANY(ARRAY(SELECT DISTINCT id FROM walked_pairs))
              AND ue.entity_id = ANY(ARRAY(SELECT DISTINCT entity_id FROM seed_entities WHERE NOT walked))
        ),
        light_pairs AS (
            SELECT rn.id, se.seed, se.sim, se.w
            FROM reached_named rn
            JOIN seed_entities se ON se.entity_id = rn.entity_id AND NOT se.walked
            WHERE EXISTS (SELECT FROM walked_pairs p WHERE p.id = rn.id AND p.seed = se.seed)
        ),
        via_entities AS (
            SELECT id, max(sim) AS sim, sum(w) AS shared
            FROM (SELECT * FROM walked_pairs UNION ALL SELECT * FROM light_pairs) pairs
            GROUP BY id, seed
        ),
        via_links AS (  -- one index lookup per seed and direction (OFFSET 0 keeps them lookups: as a join
            SELECT l.to_unit AS id, s.sim * l.weight AS score  -- the planner scanned every link of a bank)
            FROM seeds s CROSS JOIN LATERAL (
                SELECT * FROM memory_links l WHERE l.from_unit = s.id AND l.link_type IN ('semantic', 'causal')
                OFFSET 0) l
            UNION ALL
            SELECT l.from_unit, s.sim * l.weight
            FROM seeds s CROSS JOIN LATERAL (
                SELECT * FROM memory_links l WHERE l.to_unit = s.id AND l.link_type IN ('semantic', 'causal')
                OFFSET 0) l
        ),
        activation AS MATERIALIZED (  -- evaluated once, whatever the planner guesses of fresh rows
            SELECT id, sim * tanh(0.5 * shared) AS score FROM via_entities
            UNION ALL
            SELECT id, score FROM via_links
        ),
        best AS (  -- only facts near the floor or above it are rounded and sorted (a fifth at 5,000)
            SELECT id, {rounded_score('score')} AS score
            FROM (SELECT id, max(score) AS score FROM activation WHERE id <> ALL({seed_ids}::uuid[])
                  GROUP BY id) reached
            WHERE score >= {near_floor}
            ORDER BY 2 DESC, id OFFSET 0
        )
        -- The scope is checked best first, one primary-key lookup per candidate above the floor, until
        -- `limit` pass (a join would read every fact of the bank); a scalar subquery is never turned
        -- into that join. Most reached facts are below the floor: they are neither checked nor sent.
        SELECT b.id, b.score FROM best b
        WHERE b.score >= {params.add(GRAPH_MIN_ACTIVATION)}
          AND {scope.holds(params, "b.id")}
        ORDER BY b.score DESC, b.id
        LIMIT {params.add(limit)}
        """,
        *params.values,
    )


def best_of_parts(parts: list[Ranked], limit: int) -> Ranked:
    """One ranking from an arm's runs on parts of its work (the graph arm's seeds, the semantic arm's
    two tables): each fact's best score, best first (equal scores by id, as the arms order them), cut
    to `limit`. Each part's `limit` best hold the whole's: a fact outranked in its best part by `limit`
    others is outranked by them in the whole. A score rounded in each part is the best score rounded:
    rounding keeps the order."""
    found = [part for part in parts if part]
    if len(found) == 1:  # already each fact once, best first (a bank with no sentence vectors)
        return found[0][:limit]
    best: dict[uuid.UUID, float] = {}
    for part in parts:
        for unit_id, score in part:
            if score > best.get(unit_id, -1.0):
                best[unit_id] = score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]


async def temporal(
    conn: asyncpg.Connection,
    scope: UnitFilter,
    query_vector: np.ndarray,
    start: datetime,
    end: datetime,
    limit: int,
) -> Ranked:
    """Facts dated inside [start, end) (event dates, else when they were said), most similar first,
    then the facts temporally or causally linked to them."""
    params = SqlParams()
    vector = params.add(query_vector)
    lo, hi = params.add(start), params.add(end)
    where = scope.where(params)
    limit_ref = params.add(limit)
    return await fetch_ranking(
        conn,
        f"""
        WITH in_window AS MATERIALIZED (  -- exact distances: an HNSW scan filtered by dates would walk
            SELECT m.id, m.embedding      -- much of the index when few facts fall inside the window
            FROM memory_units m
            WHERE {where}
              -- the span index (migration 021); least/greatest: a window given end before start is
              -- no error, the exact conditions below decide as they did without the index
              AND {FACT_TIME_SPAN} && tstzrange(least({lo}::timestamptz, {hi}), greatest({lo}::timestamptz, {hi}), '[]')
              AND {_SAID_START} < {hi}
              AND {_SAID_END} >= {lo}
        ),
        inside AS (
            SELECT w.id, 1 - (w.embedding <=> {vector}::vector) AS similarity
            FROM in_window w
            ORDER BY w.embedding <=> {vector}::vector, w.id
            LIMIT {limit_ref}
        ),
        best AS (SELECT * FROM inside ORDER BY similarity DESC, id LIMIT 20),
        -- One index lookup per best fact and direction (OFFSET 0 keeps them lookups: as a join, the
        -- planner hashed every temporal link of the bank, 290 of this arm's 370 ms at 100,000 facts).
        linked AS MATERIALIZED (  -- evaluated once, whatever the planner guesses of fresh rows
            SELECT l.to_unit AS id, b.similarity * l.weight * 0.5 AS similarity
            FROM best b CROSS JOIN LATERAL (
                SELECT * FROM memory_links l WHERE l.from_unit = b.id AND l.link_type IN ('temporal', 'causal')
                OFFSET 0) l
            UNION ALL
            SELECT l.from_unit, b.similarity * l.weight * 0.5
            FROM best b CROSS JOIN LATERAL (
                SELECT * FROM memory_links l WHERE l.to_unit = b.id AND l.link_type IN ('temporal', 'causal')
                OFFSET 0) l
        ),
        spread AS (  -- a primary-key lookup per linked fact (a join read every fact of the bank)
            SELECT k.id, k.similarity FROM linked k
            WHERE {scope.holds(params, "k.id")}
        )
        SELECT id, {rounded_score('max(similarity)')} AS score
        FROM (SELECT * FROM inside UNION ALL SELECT * FROM spread) c
        GROUP BY id
        ORDER BY score DESC, id
        LIMIT {limit_ref}
        """,
        *params.values,
    )
