"""Every approximate vector search can be served by its HNSW index. The indexes hold half-precision
copies of the vectors (migration 025), so a statement must order by `indexed_distance` to use one;
ordered by the full-precision distance it still answers rightly, by computing every distance and
sorting — which no result-checking test notices, and which at 100,000 facts is a scan of the bank for
every search. Each search's statements are recorded as they run, then explained with sequential scans
and sorts switched off: an index the statement can use then shows in its plan."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import numpy as np
import pytest

from engram.models.embedder import embed_query
from engram.recall import arms
from engram.recall.filters import UnitFilter
from engram.recall.pipeline import ALL_TYPES
from engram.store import facts_write as fw
from engram.store import observations
from engram.store.pool import encode_vector
from engram.store.semantic_links import best_candidates
from tests.support.plans import Recording, plan_nodes
from tests.support.retained_store import store_after_retaining

BANK = "indexed"
UNITS_INDEX = "memory_units_embedding"
SENTENCES_INDEX = "memory_unit_sentences_embedding"
FACTS = (
    "Mira keeps bees on the roof of her school.",
    "Tomas restored a wooden sailing boat last summer.",
    "Ines learned to play the cello at forty.",
    "The ferry to the island leaves at seven every morning.",
)


def index_scans(plan: Any) -> set[str]:
    """The indexes an EXPLAIN (FORMAT JSON) plan scans."""
    return {node["Index Name"] for node in plan_nodes(plan) if "Index Name" in node}


async def indexes_usable(conn: asyncpg.Connection, recording: Recording) -> set[str]:
    """The indexes the recorded statements' plans scan when nothing but an index can order them."""
    used: set[str] = set()
    for sql, args in recording.statements:
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
            used |= index_scans(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))
    return used


@pytest.fixture
async def conn(isolated_dsn: str) -> Any:
    async with store_after_retaining(isolated_dsn, BANK, FACTS) as pool, pool.acquire() as connection:
        yield connection  # the store's own session settings and codecs


async def bank_facts(conn: asyncpg.Connection) -> tuple[list[uuid.UUID], list[np.ndarray]]:
    rows = await conn.fetch("SELECT id, embedding FROM memory_units WHERE bank_id = $1 ORDER BY id", BANK)
    return [row["id"] for row in rows], [row["embedding"] for row in rows]


async def test_the_semantic_arms_indexed_search_can_use_both_indexes(conn: asyncpg.Connection) -> None:
    recording = Recording(conn)
    query = embed_query("Who makes music on an old instrument?")
    found = await arms.semantic(recording, UnitFilter(BANK, ALL_TYPES), query, 2, 0.0, arms.EXACT_SEARCH_MAX_FACTS + 1)
    assert found
    assert {UNITS_INDEX, SENTENCES_INDEX} <= await indexes_usable(conn, recording)


async def test_exact_searches_are_what_the_index_is_not_used_for(conn: asyncpg.Connection) -> None:
    # A control for the check: a scope searched exactly orders by the full-precision distance, which
    # neither index can serve, so neither may show.
    recording = Recording(conn)
    query = embed_query("Who makes music on an old instrument?")
    await arms.semantic(recording, UnitFilter(BANK, ALL_TYPES), query, 2, 0.0, 1)
    assert not {UNITS_INDEX, SENTENCES_INDEX} & await indexes_usable(conn, recording)


async def test_the_link_searches_through_the_index_can_use_it(conn: asyncpg.Connection) -> None:
    ids, vectors = await bank_facts(conn)
    inside = Recording(conn)
    async with conn.transaction():  # a retain's transaction: the search sets its settings locally
        await fw.insert_semantic_links(inside, BANK, ids[:2], exact=False)
    beside = Recording(conn)
    encoded = [encode_vector(v) for v in vectors]
    await best_candidates(beside, BANK, ids, encoded, 0, 2, exact=False, min_similarity=0.0, per_unit=5)
    assert UNITS_INDEX in await indexes_usable(conn, inside)
    assert UNITS_INDEX in await indexes_usable(conn, beside)


async def test_the_observation_searches_can_use_the_index(conn: asyncpg.Connection) -> None:
    _, vectors = await bank_facts(conn)
    recording = Recording(conn)
    await observations.related_observations(recording, BANK, [], vectors[:2], 3)
    await observations.nearest_in_scope(recording, BANK, [], vectors[0], [], 3)
    assert len(recording.statements) == 2
    for statement in recording.statements:  # each of the two, not either
        single = Recording(conn)
        single.statements.append(statement)
        assert UNITS_INDEX in await indexes_usable(conn, single)


async def test_the_exact_search_of_a_banks_sentences_can_use_the_bank_index(conn: asyncpg.Connection) -> None:
    # The exact search reads a bank's sentences by their bank (migration 034): without the index, a
    # small bank's recall would scan every bank's sentences.
    recording = Recording(conn)
    query = embed_query("Who makes music on an old instrument?")
    await arms.semantic_side(recording, UnitFilter(BANK, ALL_TYPES), query, 2, "memory_unit_sentences", 1)
    assert "memory_unit_sentences_bank" in await indexes_usable(conn, recording)
