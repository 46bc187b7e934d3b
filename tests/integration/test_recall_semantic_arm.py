"""The semantic arm ranks a scope the same whichever way it searches: exact distances up to
EXACT_SEARCH_MAX_FACTS facts, the HNSW index beyond (exhaustive on a bank this small), and either
way with the scope counted in the query when the caller does not know its size. Below the threshold
the recall never takes the index's way, so without this a broken one would show only at scale.
The facts' own vectors and their sentences' are searched apart, on one connection or two (the facts'
own in two halves of the table from a few thousand facts); a fact scores its best vector either way,
and its vector stays in its row however long the row."""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import numpy as np
import pytest

from engram.models.embedder import embed_query
from engram.recall import arms, page_halves
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


@contextlib.asynccontextmanager
async def two_connections(dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    """Two connections set up as the pool sets up its own (a recall's and its spare)."""
    conns = [await asyncpg.connect(dsn, server_settings=SESSION_SETTINGS) for _ in range(2)]
    try:
        for conn in conns:
            await _init_connection(conn)
        yield conns
    finally:
        for conn in conns:
            await conn.close()


CONVERSATION = "\n".join([  # turns of several sentences: each is one fact with a vector per sentence
    "Mira: I keep bees on the roof of my school. Last week I also fixed my old bicycle.",
    "Tomas: I restored a wooden sailing boat. My sister painted the hull blue.",
    "Ines: I learned the cello at forty. Yesterday I baked rye bread for the neighbours.",
    "Jonas: My cinema shows silent films. The projector broke during the storm.",
])


@pytest.mark.parametrize("outside", ["tagged otherwise", "invalidated"])
async def test_its_two_tables_searched_on_two_connections_rank_as_their_best_vectors(
    http: httpx.Client, bank_id: str, pg_dsn: str, outside: str
) -> None:
    """The arm searches the facts' own vectors and their sentences' by two statements, on two
    connections at once when the recall has a second one; a fact scores its best vector either way,
    and a fact out of scope is not found by its sentences either: one outside a scope narrowed by tags
    (whose facts' sentences are read through the facts), or one invalidated in a scope of the whole
    bank (whose sentences are read by bank, and the scope checked best first)."""
    out_of_scope = "Karl: I fixed a bicycle for my neighbour. Then I repaired his bicycle bell too."
    other_tag = "other" if outside == "tagged otherwise" else "kept"
    for content, tag in ((CONVERSATION, "kept"), (out_of_scope, other_tag), *((fact, "kept") for fact in FACTS)):
        response = http.post(f"/v1/default/banks/{bank_id}/memories",
                             json={"items": [{"content": content, "tags": [tag]}]})
        assert response.status_code == 200, response.text
    if outside == "tagged otherwise":
        scope = UnitFilter(bank_id, ALL_TYPES, ["kept"], "any_strict")
    else:
        scope = UnitFilter(bank_id, ALL_TYPES)
    query = embed_query("Who repaired a bicycle?")
    async with two_connections(pg_dsn) as conns:
        karl = await conns[0].fetchval("SELECT id FROM memory_units WHERE bank_id = $1 AND text LIKE 'Karl:%'", bank_id)
        if outside == "invalidated":
            response = http.patch(f"/v1/default/banks/{bank_id}/memories/{karl}",
                                  json={"state": "invalidated", "reason": "said in jest"})
            assert response.status_code == 200, response.text
        on_one = await arms.semantic(conns[0], scope, query, 6, 0.0)
        on_two = await arms.semantic(conns[0], scope, query, 6, 0.0, spare=conns[1])
        own = {row["id"]: row["embedding"] for row in await conns[0].fetch(
            "SELECT id, embedding FROM memory_units WHERE bank_id = $1 AND id <> $2", bank_id, karl)}
        sentences = [(row["unit_id"], row["embedding"]) for row in await conns[0].fetch(
            "SELECT unit_id, embedding FROM memory_unit_sentences WHERE bank_id = $1", bank_id)]
        texts = {row["id"]: row["text"] for row in await conns[0].fetch(
            "SELECT id, text FROM memory_units WHERE bank_id = $1", bank_id)}

    def similarity(vector: np.ndarray) -> float:
        return float(np.dot(vector, query) / (np.linalg.norm(vector) * np.linalg.norm(query)))

    best_own = {unit: similarity(vector) for unit, vector in own.items()}
    best_sentence: dict[uuid.UUID, float] = {}
    for unit, vector in sentences:
        best_sentence[unit] = max(best_sentence.get(unit, -1.0), similarity(vector))
    assert karl in best_sentence, "the fact out of scope has sentences too"
    best = {unit: max(score, best_sentence.get(unit, -1.0)) for unit, score in best_own.items()}
    expected = sorted(best, key=lambda unit: (-best[unit], unit))[:6]

    assert on_two == on_one
    assert [unit for unit, _ in on_two] == expected, [texts[unit] for unit, _ in on_two]
    for unit, score in on_two:
        assert math.isclose(score, best[unit], abs_tol=1e-5)
    assert "bicycle" in texts[on_two[0][0]]
    top = {unit for unit, _ in on_two}
    assert any(best_sentence.get(u, -1.0) > best_own[u] for u in top), "some found by a sentence"
    assert any(best_own[u] > best_sentence.get(u, -1.0) for u in top), "and some by their own vector"


async def test_the_facts_own_vectors_read_in_two_halves_of_the_table_rank_as_one_search(
    http: httpx.Client, bank_id: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `page_halves.HALVES_MIN_FACTS` facts in scope (lowered here) the exact search reads the
    facts' own vectors in two halves of the table, cut at a page, beside the sentences' vectors, on
    two connections: each fact is in one half, so the arm ranks as one statement over the whole. The
    cut is chosen here so that the best facts lie on both sides of it."""
    for content in (CONVERSATION, *FACTS):
        response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": content}]})
        assert response.status_code == 200, response.text
    scope = UnitFilter(bank_id, ALL_TYPES)
    query = embed_query("Who fixed or restored something old?")
    async with two_connections(pg_dsn) as conns:
        size = await conns[0].fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id)
        whole = await arms.semantic(conns[0], scope, query, 6, 0.0, size)  # one statement a table
        pages = {row["id"]: row["page"] for row in await conns[0].fetch(
            "SELECT id, (ctid::text::point)[0]::int AS page FROM memory_units WHERE bank_id = $1", bank_id)}
        best_pages = sorted({pages[unit] for unit, _ in whole})
        assert len(best_pages) > 1, "the best facts lie on more than one page"
        cuts: list[int] = []

        async def cut_after_the_first_best_page(conn: asyncpg.Connection) -> int:
            cuts.append(best_pages[1])
            return best_pages[1]

        monkeypatch.setattr(page_halves, "middle_page", cut_after_the_first_best_page)
        monkeypatch.setattr(page_halves, "HALVES_MIN_FACTS", 1)
        in_halves = await arms.semantic(conns[0], scope, query, 6, 0.0, size, spare=conns[1])

    assert cuts == [best_pages[1]], "the search was cut in two halves"
    assert len(whole) == 6 < size
    assert in_halves == whole


async def test_a_long_turns_vector_and_text_stay_in_its_row(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    """A fact's row over ~2 kB has values moved to the TOAST table, the largest first: its vector,
    unless the column says otherwise (migration 033). Every exact search computes the distance of
    every fact in scope, and every result shows the fact's text; both are read from the row."""
    question = "Tomas: " + " ".join(f"Did the {word} boat survive the storm near the harbour?" for word in
                                    ("old", "blue", "wooden", "small", "fast", "red", "long", "white", "narrow"))
    answer = "Mira: " + " ".join(f"The {word} boat was fine, but its sail was torn by the wind." for word in
                                 ("old", "blue", "wooden", "small", "fast", "red", "long", "white", "narrow"))
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{
        "content": f"{question}\n{answer}", "metadata": {"session": "7", "source": "harbour chat"}}]})
    assert response.status_code == 200, response.text

    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch(
            "SELECT pg_column_size(m.*) AS row_size, pg_column_toast_chunk_id(embedding) AS vector_chunk,"
            " pg_column_toast_chunk_id(text) AS text_chunk FROM memory_units m WHERE bank_id = $1", bank_id)
    finally:
        await conn.close()
    assert len(rows) == 2 and all(row["row_size"] > 2100 for row in rows), "rows PostgreSQL toasts"
    assert [(row["vector_chunk"], row["text_chunk"]) for row in rows] == [(None, None)] * 2
