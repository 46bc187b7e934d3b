"""Entity counts after facts are deleted: a small delete recounts only the entity pairs its facts
joined, a big one every pair of every touched entity. Either way the stored mention counts and
co-occurrences must equal a recount from scratch of the mentions left, latest co-occurrence included."""

from __future__ import annotations

import asyncpg
import pytest

from engram import Memory
from engram.store import entities
from engram.store.documents import delete_document
from engram.store.memories import delete_facts_of_type
from tests.support.entity_counts import MENTIONS_RECOUNTED, MENTIONS_STORED

BANK = "harbour"
# Each document one retain, in this order: (A, B) co-occur in doc-1 and later in doc-2, so deleting
# doc-2 moves their latest co-occurrence back; (A, C) only in doc-3 and doc-4; (B, C) only in doc-4.
DOCUMENTS = {
    "doc-1": ("Ana met Bruno at the harbour.", ["Ana", "Bruno"]),
    "doc-2": ("Ana and Bruno repaired a boat with Dario.", ["Ana", "Bruno", "Dario"]),
    "doc-3": ("Ana sailed with Carla.", ["Ana", "Carla"]),
    "doc-4": ("Ana, Bruno and Carla ate dinner.", ["Ana", "Bruno", "Carla"]),
}

STORED = "SELECT entity_a, entity_b, count, last_cooccurred FROM entity_cooccurrences WHERE bank_id = $1"
RECOUNTED = """
    SELECT a.entity_id, b.entity_id, count(*), max(m.created_at) FROM unit_entities a
    JOIN unit_entities b ON b.unit_id = a.unit_id AND a.entity_id < b.entity_id
    JOIN memory_units m ON m.id = a.unit_id WHERE m.bank_id = $1 GROUP BY 1, 2
"""


async def assert_counts_match_a_recount(conn: asyncpg.Connection) -> dict[str, int]:
    stored = {tuple(row) for row in await conn.fetch(STORED, BANK)}
    assert stored == {tuple(row) for row in await conn.fetch(RECOUNTED, BANK)}
    mentions = dict(list(row) for row in await conn.fetch(MENTIONS_STORED, BANK))
    assert mentions == dict(list(row) for row in await conn.fetch(MENTIONS_RECOUNTED, BANK))
    return mentions


def retain_documents(dsn: str) -> None:
    memory = Memory(database_url=dsn)
    try:
        for document_id, (text, names) in DOCUMENTS.items():
            memory.retain(BANK, text, document_id=document_id, entities=[{"text": name} for name in names])
    finally:
        memory.close()


@pytest.mark.parametrize("pairwise_limit", [entities.PAIRWISE_RECOUNT_LIMIT, 0], ids=["pairwise", "all-pairs"])
async def test_counts_after_deleting_documents_equal_a_recount(
    isolated_dsn: str, monkeypatch: pytest.MonkeyPatch, pairwise_limit: int
) -> None:
    retain_documents(isolated_dsn)
    monkeypatch.setattr(entities, "PAIRWISE_RECOUNT_LIMIT", pairwise_limit)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        before = await assert_counts_match_a_recount(conn)
        assert before == {"Ana": 4, "Bruno": 3, "Carla": 2, "Dario": 1}
        pairs_before = await conn.fetchval("SELECT count(*) FROM entity_cooccurrences WHERE bank_id = $1", BANK)

        assert await delete_document(conn, BANK, "doc-2", import_wait=None) == 1
        after = await assert_counts_match_a_recount(conn)
        assert after == {"Ana": 3, "Bruno": 2, "Carla": 2}, "Dario, no longer mentioned, is gone"
        pairs = await conn.fetchval("SELECT count(*) FROM entity_cooccurrences WHERE bank_id = $1", BANK)
        assert pairs == pairs_before - 2, "the pairs with Dario went with him"

        assert await delete_document(conn, BANK, "doc-4", import_wait=None) == 1
        assert await assert_counts_match_a_recount(conn) == {"Ana": 2, "Bruno": 1, "Carla": 1}
    finally:
        await conn.close()


async def test_counts_after_clearing_every_world_fact_a_few_at_a_time_equal_a_recount(isolated_dsn: str) -> None:
    # DELETE …/memories?type=world deletes 20,000 facts per statement and recounts the entities they
    # mentioned once at the end; one fact per statement here.
    retain_documents(isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await conn.execute("UPDATE memory_units SET fact_type = 'experience' WHERE document_id = 'doc-3'")
        async with conn.transaction():
            assert await delete_facts_of_type(conn, BANK, "world", chunk=1) == 3
        left = await conn.fetch("SELECT document_id, fact_type FROM memory_units WHERE bank_id = $1", BANK)
        assert [tuple(row) for row in left] == [("doc-3", "experience")]
        assert await assert_counts_match_a_recount(conn) == {"Ana": 1, "Carla": 1}
        assert await conn.fetchval("SELECT count(*) FROM entity_cooccurrences WHERE bank_id = $1", BANK) == 1
    finally:
        await conn.close()
