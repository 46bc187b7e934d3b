"""A bulk retain searches its semantic links beside its transaction (engram.store.semantic_links): the
committed facts on other connections, the batch's facts among themselves from their vectors. The links
must be the ones the transaction's own search gives: each new fact to every other fact of the bank at
least 0.7 alike, the most alike first, up to 50."""

from __future__ import annotations

import logging

import asyncpg
import numpy as np
import pytest

from engram import Memory
from engram.store.pool import decode_text_vector, decode_vector, encode_vector
from engram.store.semantic_links import best_candidates, insert_found

TOPICS = (
    "Parcel {n} left the depot in Leeds on a Tuesday.",
    "The red kayak number {n} is kept in the boathouse by the lake.",
    "Grandma baked {n} loaves of rye bread on Sunday morning.",
    "Train {n} to Glasgow was delayed by snow this morning.",
)
SIDE_PATH = "searched beside the transaction"


def items(numbers: range) -> list[dict[str, str]]:
    return [{"content": topic.format(n=n)} for n in numbers for topic in TOPICS]


def expected_links(vectors: dict, new: set) -> set:
    unit = {i: v / np.linalg.norm(v) for i, v in vectors.items()}
    return {(a, b) for a in new for b in unit if b != a and float(unit[a] @ unit[b]) >= 0.7}


async def bank_state(dsn: str, bank: str) -> tuple[dict, set]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT id, embedding::text AS e FROM memory_units WHERE bank_id = $1", bank)
        links = await conn.fetch("SELECT from_unit, to_unit FROM memory_links"
                                 " WHERE bank_id = $1 AND link_type = 'semantic'", bank)
    finally:
        await conn.close()
    vectors = {row["id"]: decode_text_vector(row["e"]).astype(np.float64) for row in rows}
    return vectors, {(row["from_unit"], row["to_unit"]) for row in links}


async def test_bulk_links_match_the_exact_nearest_facts(isolated_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="engram.store")
    memory = Memory(database_url=isolated_dsn)
    try:
        # A larger bank first: the small one below is searched beside it (exactly, as every bank of up to
        # facts_write.EXACT_LINKS_MAX_FACTS).
        seen_by_call: list[set] = []
        for start in range(0, 100, 25):
            memory.retain_batch("large", items(range(1000 + start, 1000 + start + 25)))
            seen_by_call.append(set((await bank_state(isolated_dsn, "large"))[0]))
        conn = await asyncpg.connect(isolated_dsn)
        await conn.execute("ANALYZE memory_units")
        await conn.close()
        memory.retain_batch("small", items(range(10)))  # 40 facts: searched inside the transaction
        before, _ = await bank_state(isolated_dsn, "small")
        caplog.clear()
        memory.retain_batch("small", items(range(10, 25)))  # 60 facts: a bulk retain
        assert any(SIDE_PATH in r.getMessage() for r in caplog.records), "the bulk retain searched beside"
    finally:
        memory.close()

    vectors, links = await bank_state(isolated_dsn, "small")
    new = set(vectors) - set(before)
    assert len(new) == 60
    expected = expected_links(vectors, new)
    found = {link for link in links if link[0] in new}
    assert {b for _, b in expected} & set(before) and {b for _, b in expected} & new, "links of both kinds"
    assert max(sum(1 for a, _ in expected if a == fact) for fact in new) < 50, "below the cap: no ties to break"
    assert found == expected

    # The large bank's bulk retains searched through the HNSW index: approximate, but nothing below the
    # floor, at most 50 a fact, and nearly all a fact could have among the facts of its call and before.
    vectors, links = await bank_state(isolated_dsn, "large")
    alike = expected_links(vectors, set(vectors))
    assert links <= alike
    reachable = 0
    for call, seen in enumerate(seen_by_call):
        for fact in seen - (seen_by_call[call - 1] if call else set()):
            reachable += min(50, sum(1 for a, b in alike if a == fact and b in seen))
            assert sum(1 for a, _ in links if a == fact) <= 50
    assert len(links) >= 0.95 * reachable


async def test_the_side_search_keeps_each_facts_best_of_both_kinds_never_itself(isolated_dsn: str) -> None:
    texts = ("The harbour master counted 12 boats on Monday.", "The harbour master counted 13 boats on Monday.",
             "A bakery in Leeds sells rye bread.", "Snow delayed the train to Glasgow.",
             "A bakery in York sells rye bread.")
    memory = Memory(database_url=isolated_dsn)
    try:
        # Facts 2 and 3 play the committed ones. 0, 1 and 4 play a retain's new facts: in a bank of their
        # own, so that the side connection does not see them in the bank, as it would not see them before
        # their transaction commits.
        memory.retain_batch("merge", [{"content": texts[i]} for i in (2, 3)])
        memory.retain_batch("new", [{"content": texts[i]} for i in (0, 1, 4)])
    finally:
        memory.close()
    conn = await asyncpg.connect(isolated_dsn)
    await conn.set_type_codec("vector", schema="public", encoder=encode_vector, decoder=decode_vector,
                              format="binary")  # as the pool's connections have it
    try:
        rows = await conn.fetch("SELECT id, text, embedding::text AS e FROM memory_units")
        ids = [next(row["id"] for row in rows if text.rstrip(".") in row["text"]) for text in texts]
        vectors = {row["id"]: decode_text_vector(row["e"]) for row in rows}
        new = [ids[0], ids[1], ids[4]]
        encoded = [encode_vector(vectors[i]) for i in new]
        async with conn.transaction():
            await conn.execute("DELETE FROM memory_links")
            found = [await best_candidates(conn, "merge", new, encoded, first, 2,
                                           exact=True, min_similarity=-1.0, per_unit=2) for first in (0, 2)]
            await insert_found(conn, "merge", new, found)
            links = await conn.fetch("SELECT from_unit, to_unit, weight FROM memory_links")
    finally:
        await conn.close()
    vectors = {i: v.astype(np.float64) for i, v in vectors.items()}

    def similarity(a: object, b: object) -> float:
        return float(vectors[a] @ vectors[b] / np.linalg.norm(vectors[a]) / np.linalg.norm(vectors[b]))

    expected = {}
    for fact in new:
        candidates = sorted(((similarity(fact, other), other) for other in ids if other != fact), reverse=True)
        expected.update({(fact, other): score for score, other in candidates[:2]})
    assert (ids[0], ids[1]) in expected and (ids[1], ids[0]) in expected, "twins: each other's best"
    assert (ids[4], ids[2]) in expected, "a new fact's best among the committed ones"
    found_links = {(row["from_unit"], row["to_unit"]): row["weight"] for row in links}
    assert found_links == pytest.approx(expected, abs=1e-5), "each fact's best two of both kinds, never itself"
