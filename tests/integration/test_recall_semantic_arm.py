"""The semantic arm ranks a scope the same whichever way it searches: exact distances up to
EXACT_SEARCH_MAX_FACTS facts, the HNSW index beyond (exhaustive on a bank this small), and either
way with the scope counted in the query when the caller does not know its size. Below the threshold
the recall never takes the index's way, so without this a broken one would show only at scale."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from engram.models.embedder import embed_query
from engram.recall import arms
from engram.recall.filters import UnitFilter
from engram.recall.pipeline import ALL_TYPES
from engram.store.pool import SESSION_SETTINGS, _init_connection

TOP = 3  # fewer than the bank holds: each search must find the best, not merely every fact
FACTS = [
    "Mira keeps bees on the roof of her school.",
    "Tomas restored a wooden sailing boat last summer.",
    "The bakery on Elm Street sells rye bread on Fridays.",
    "Ines learned to play the cello at forty.",
    "A storm knocked down the old oak by the river.",
    "Jonas runs a small cinema that shows silent films.",
    "Priya grows chillies in her greenhouse.",
    "The ferry to the island leaves at seven every morning.",
    "Oskar collects stamps from countries that no longer exist.",
    "Lena repaired the church organ with her father.",
]


@pytest.fixture
def bank_with_facts(http: httpx.Client, bank_id: str) -> str:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": t} for t in FACTS]})
    assert response.status_code == 200, response.text
    return bank_id


async def test_exact_and_indexed_searches_rank_the_scope_alike(
    bank_with_facts: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = UnitFilter(bank_with_facts, ALL_TYPES)
    query = embed_query("Who makes music on an old instrument?")
    conn = await asyncpg.connect(pg_dsn, server_settings=SESSION_SETTINGS)
    try:
        await _init_connection(conn)
        size = await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_with_facts)
        exact = await arms.semantic(conn, scope, query, TOP, 0.0, size)
        counted_exact = await arms.semantic(conn, scope, query, TOP, 0.0)
        indexed = await arms.semantic(conn, scope, query, TOP, 0.0, arms.EXACT_SEARCH_MAX_FACTS + 1)
        monkeypatch.setattr(arms, "EXACT_SEARCH_MAX_FACTS", size - 1)
        counted_indexed = await arms.semantic(conn, scope, query, TOP, 0.0)
        best = await conn.fetchval("SELECT text FROM memory_units WHERE id = $1", exact[0][0])
    finally:
        await conn.close()

    assert len(exact) == TOP and size >= len(FACTS)
    assert "cello" in best or "organ" in best
    assert [unit for unit, _ in exact] == [unit for unit, _ in counted_exact]
    assert [unit for unit, _ in indexed] == [unit for unit, _ in exact]
    assert [unit for unit, _ in counted_indexed] == [unit for unit, _ in exact]
    for found in (counted_exact, indexed, counted_indexed):
        assert [round(score, 5) for _, score in found] == [round(score, 5) for _, score in exact]

