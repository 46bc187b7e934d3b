"""Clearing a bank's memories and deleting a bank remove everything of that bank in a few statements
per 20,000 facts (keyword postings by bank, each chunk's links by its facts, then the facts, then their
documents), so these count each table's rows of the bank before and after,
and check that a neighbouring bank keeps all of its own."""

from __future__ import annotations

import asyncpg
import httpx

from engram.store.memories import delete_bank_memories

# Rows of one bank ($1) in each table a retain writes to.
BANK_ROWS = {
    "memory_units": "SELECT count(*) FROM memory_units WHERE bank_id = $1",
    "memory_links": "SELECT count(*) FROM memory_links WHERE bank_id = $1",
    "keyword_postings": "SELECT count(*) FROM keyword_postings WHERE bank_id = $1",
    "keyword_frequencies": "SELECT count(*) FROM (SELECT FROM keyword_frequencies WHERE bank_id = $1"
                           " GROUP BY fact_type, lexeme HAVING sum(facts) <> 0) counted",  # rows are deltas
    "documents": "SELECT count(*) FROM documents WHERE bank_id = $1",
    "chunks": "SELECT count(*) FROM chunks WHERE bank_id = $1",
    "entities": "SELECT count(*) FROM entities WHERE bank_id = $1",
    "entity_cooccurrences": "SELECT count(*) FROM entity_cooccurrences WHERE bank_id = $1",
    "unit_entities": "SELECT count(*) FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id"
                     " WHERE e.bank_id = $1",
    "consolidation_status": "SELECT count(*) FROM consolidation_status WHERE bank_id = $1",
}


def retain_harbour_days(http: httpx.Client, bank_id: str) -> None:
    """Alike facts on one day, in two documents, naming two people together: semantic and temporal
    links, keyword postings, chunks, entities and their co-occurrences."""
    items = [{"content": f"Ines and Tomas repaired the red boat number {n} at the harbour on Monday.",
              "document_id": f"log-{n % 2}", "timestamp": "2026-06-01T09:00:00Z",
              "entities": [{"text": "Ines"}, {"text": "Tomas"}]} for n in range(6)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def rows_of(conn: asyncpg.Connection, bank_id: str) -> dict[str, int]:
    return {table: await conn.fetchval(sql, bank_id) for table, sql in BANK_ROWS.items()}


async def fill_bank_and_neighbour(
    http: httpx.Client, conn: asyncpg.Connection, bank_id: str, neighbour: str
) -> tuple[dict[str, int], dict[str, int]]:
    """The same days retained into both banks; each bank's rows per table."""
    retain_harbour_days(http, bank_id)
    retain_harbour_days(http, neighbour)
    before = await rows_of(conn, bank_id)
    assert all(before.values()), f"every table holds rows of the bank: {before}"
    neighbours = await rows_of(conn, neighbour)
    assert neighbours == before
    return before, neighbours


async def test_clearing_and_deleting_a_bank_leave_no_row_of_it_and_every_row_of_its_neighbour(
    http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    neighbour = f"{bank_id}-neighbour"
    conn = await asyncpg.connect(pg_dsn)
    try:
        before, neighbours = await fill_bank_and_neighbour(http, conn, bank_id, neighbour)

        cleared = http.delete(f"/v1/default/banks/{bank_id}/memories").json()
        assert cleared["deleted_count"] == before["memory_units"]
        assert await rows_of(conn, bank_id) == dict.fromkeys(BANK_ROWS, 0)
        assert await rows_of(conn, neighbour) == neighbours
        assert http.get(f"/v1/default/banks/{bank_id}/stats").json()["total_links"] == 0

        retain_harbour_days(http, bank_id)  # a cleared bank fills again as a new one would
        assert await rows_of(conn, bank_id) == before

        assert http.delete(f"/v1/default/banks/{bank_id}").status_code == 200
        assert await rows_of(conn, bank_id) == dict.fromkeys(BANK_ROWS, 0)
        assert await conn.fetchval("SELECT count(*) FROM banks WHERE bank_id = $1", bank_id) == 0
        assert await rows_of(conn, neighbour) == neighbours
    finally:
        await conn.close()


async def test_a_bank_cleared_a_few_facts_and_documents_at_a_time_loses_every_row(
    http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    # The API deletes 20,000 facts (or documents) per statement; here two at a time, so the bank's six
    # facts and two documents take several statements each, all read from cursors opened before the
    # first delete.
    neighbour = f"{bank_id}-neighbour"
    conn = await asyncpg.connect(pg_dsn)
    try:
        before, neighbours = await fill_bank_and_neighbour(http, conn, bank_id, neighbour)
        assert before["memory_units"] > 4 and before["documents"] == 2, before
        async with conn.transaction():
            assert await delete_bank_memories(conn, bank_id, chunk=2) == before["memory_units"]
        assert await rows_of(conn, bank_id) == dict.fromkeys(BANK_ROWS, 0)
        assert await rows_of(conn, neighbour) == neighbours
    finally:
        await conn.close()


async def test_every_foreign_key_leads_an_index(server: object, pg_dsn: str) -> None:
    # PostgreSQL acts on a referenced row's deletion with one query per row against the referencing
    # table. Without an index that leads with the key's columns, each query reads the whole table:
    # clearing a 100,000-memory bank set its facts' chunk_id to NULL with one scan of every fact per
    # chunk (~1,100 s), until migration 029. A partial index counts when it only leaves out NULL keys.
    conn = await asyncpg.connect(pg_dsn)
    try:
        unindexed = await conn.fetch(
            """
            SELECT c.conrelid::regclass::text AS referencing, c.conname FROM pg_constraint c
            WHERE c.contype = 'f' AND NOT EXISTS (
                SELECT FROM pg_index i
                WHERE i.indrelid = c.conrelid
                  AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey
                  AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] <@ c.conkey
                  AND (i.indpred IS NULL OR pg_get_expr(i.indpred, i.indrelid) ~ '^\\(\\w+ IS NOT NULL\\)$'))
            """
        )
        assert [(row["referencing"], row["conname"]) for row in unindexed] == []
    finally:
        await conn.close()
