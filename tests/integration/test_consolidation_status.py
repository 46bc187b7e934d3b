"""A fact's consolidation status lives in a table of its own (migration 023): marking a fact
consolidated leaves its memory row — and so that row's HNSW entry — as retain wrote it; every unit
gets a status row whoever inserts it, and loses it with the unit; the migration carries the statuses
of facts written before it over."""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import pytest

from engram.store.migrate import apply_migrations, migration_files
from tests.conftest import RunningServer, scripted_server, separate_database
from tests.integration.test_consolidation import Script
from tests.support.migrations import migrate_before
from tests.support.scripted_llm import ScriptedLLM
from tests.support.waiting import settle

EMBEDDING = "[" + ",".join(["0.1"] * 384) + "]"


@pytest.fixture(scope="module")
def status_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    """A server with the scripted LLM on a database of its own, whose rows the tests read."""
    with scripted_server(pg_dsn, scripted_llm, "consolidation-status") as running:
        yield running


async def test_consolidating_facts_leaves_their_memory_rows_as_retain_wrote_them(
    status_server: tuple[RunningServer, str], llm: ScriptedLLM, bank_id: str
) -> None:
    server, dsn = status_server
    Script(llm)  # one fact per item; consolidation creates nothing
    with server.client() as http:
        texts = ["The ferry leaves at nine.", "The harbour master is called Ines.", "Gulls nest on the pier."]
        response = http.post(f"/v1/default/banks/{bank_id}/memories",
                             json={"items": [{"content": text} for text in texts]})
        assert response.status_code == 200, response.text
        stats = settle(http, bank_id)
        assert (stats["pending_consolidation"], stats["failed_consolidation"]) == (0, 0), stats
        listed = http.get(f"/v1/default/banks/{bank_id}/memories/list",
                          params={"consolidation_state": "done"}).json()["items"]
        assert sorted(item["text"] for item in listed) == sorted(texts)
        assert all(item["consolidated_at"] for item in listed), listed
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            """
            SELECT m.xmin::text AS unit_version, d.xmin::text AS retain_version, s.xmin::text AS status_version
            FROM memory_units m JOIN documents d ON d.bank_id = m.bank_id AND d.id = m.document_id
            JOIN consolidation_status s ON s.unit_id = m.id
            WHERE m.bank_id = $1
            """,
            bank_id,
        )
    finally:
        await conn.close()
    assert len(rows) == len(texts)
    for row in rows:
        # Written by the retain's transaction and never since; the mark went to the status row.
        assert row["unit_version"] == row["retain_version"], row
        assert row["status_version"] != row["retain_version"], row


async def test_every_unit_has_one_status_row_whoever_inserts_it_and_loses_it_with_the_unit(
    status_server: tuple[RunningServer, str], bank_id: str
) -> None:
    _, dsn = status_server
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank_id)
        fact, observation = await conn.fetch(
            "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding)"
            " VALUES (gen_random_uuid(), $1, 'a fact', 'world', $2::vector),"
            "        (gen_random_uuid(), $1, 'an observation', 'observation', $2::vector)"
            " RETURNING id, created_at",
            bank_id, EMBEDDING,
        )
        status = {r["unit_id"]: r for r in await conn.fetch(
            "SELECT * FROM consolidation_status WHERE bank_id = $1", bank_id)}
        assert set(status) == {fact["id"], observation["id"]}
        assert status[fact["id"]]["consolidated_at"] is None, "a fact waits for consolidation"
        assert status[observation["id"]]["consolidated_at"] == observation["created_at"], \
            "an observation is consolidated when it is written"
        assert status[fact["id"]]["queued_at"] == fact["created_at"]
        await conn.execute("DELETE FROM memory_units WHERE id = $1", fact["id"])
        assert await conn.fetchval("SELECT count(*) FROM consolidation_status WHERE unit_id = $1", fact["id"]) == 0
        await conn.execute("DELETE FROM banks WHERE bank_id = $1", bank_id)
        assert await conn.fetchval("SELECT count(*) FROM consolidation_status WHERE bank_id = $1", bank_id) == 0
    finally:
        await conn.close()


async def test_the_migration_carries_the_statuses_of_facts_written_before_it_over(pg_dsn: str) -> None:
    with separate_database(pg_dsn) as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await migrate_before(conn, 23)
            await conn.execute("INSERT INTO banks (bank_id) VALUES ('old')")
            before = await conn.fetch(
                """
                INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, created_at, consolidated_at,
                                          consolidation_failed_at, consolidation_error)
                VALUES (gen_random_uuid(), 'old', 'done', 'world', $1::vector, now() - interval '3 days',
                        now() - interval '2 days', NULL, NULL),
                       (gen_random_uuid(), 'old', 'failed', 'experience', $1::vector, now() - interval '2 days',
                        NULL, now() - interval '1 day', 'the model answered prose'),
                       (gen_random_uuid(), 'old', 'waiting', 'world', $1::vector, now() - interval '1 day',
                        NULL, NULL, NULL)
                RETURNING id, created_at, consolidated_at, consolidation_failed_at, consolidation_error
                """,
                EMBEDDING,
            )
            assert await apply_migrations(conn) == [name for version, name, _ in migration_files() if version >= 23]
            after = {r["unit_id"]: r for r in await conn.fetch("SELECT * FROM consolidation_status")}
            assert {
                r["id"]: (r["created_at"], r["consolidated_at"], r["consolidation_failed_at"], r["consolidation_error"])
                for r in before
            } == {k: (r["queued_at"], r["consolidated_at"], r["failed_at"], r["error"]) for k, r in after.items()}
            columns = {r["column_name"] for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'memory_units'")}
            assert not columns & {"consolidated_at", "consolidation_failed_at", "consolidation_error"}
        finally:
            await conn.close()

