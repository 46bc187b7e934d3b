"""A whole-bank clear or bank delete is one transaction, answered once done (~30 min at 10 M
memories), so it writes how far it has gone (facts deleted, of the facts there were) from connections
of its own, a chunk of facts at a time: `GET …/banks/{bank_id}/removal` reads it while the delete
runs, and `engram bank delete` draws it as a progress bar. The row goes when the delete ends; one
left minutes old by a server that died is not reported."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import pytest

from engram.store import memories
from engram.store.bank_removals import removal_progress, removal_under_way
from engram.store.migrate import apply_migrations
from tests.conftest import RunningServer

FACTS = "SELECT count(*) FROM memory_units WHERE bank_id = $1"


def retain_harbour_days(http: httpx.Client, bank_id: str, week: int = 0) -> None:
    """Six facts in two documents of that week, naming two people (entities the delete removes last)."""
    items = [{"content": f"Ines and Tomas repaired the red boat number {n} at the harbour in week {week}.",
              "document_id": f"week-{week}-log-{n % 2}", "timestamp": "2026-06-01T09:00:00Z",
              "entities": [{"text": "Ines"}, {"text": "Tomas"}]} for n in range(6)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


@asynccontextmanager
async def held_at_the_end(pg_dsn: str, bank_id: str) -> AsyncIterator[None]:
    """The bank's entities locked: a clear or delete, which removes them last, waits there with all
    of its facts deleted, until the block ends."""
    holder = await asyncpg.connect(pg_dsn)
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM entities WHERE bank_id = $1 FOR UPDATE", bank_id)
            yield
    finally:
        await holder.close()


async def removal_once(http: httpx.Client, bank_id: str, done: int) -> dict:
    """The removal under way, once it reports `done` facts deleted (within 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = await asyncio.to_thread(http.get, f"/v1/default/banks/{bank_id}/removal")
        if response.status_code == 200 and response.json()["done"] == done:
            return response.json()
        await asyncio.sleep(0.1)
    raise AssertionError(f"no removal of {bank_id} reported {done} facts deleted")


async def test_a_clear_and_a_bank_delete_report_their_progress_until_they_end(
    server: RunningServer, http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    removal = f"/v1/default/banks/{bank_id}/removal"
    conn = await asyncpg.connect(pg_dsn)
    try:
        steps = [("clear", "/memories?type=world", "world"), ("clear", "/memories", None), ("delete", "", None)]
        for week, (action, path, fact_type) in enumerate(steps):
            retain_harbour_days(http, bank_id, week)
            facts = await conn.fetchval(FACTS, bank_id)
            assert facts >= 6 and http.get(removal).status_code == 404
            with httpx.Client(base_url=server.url, timeout=60) as other:
                async with held_at_the_end(pg_dsn, bank_id):
                    url = f"/v1/default/banks/{bank_id}{path}"
                    deleting = asyncio.ensure_future(asyncio.to_thread(other.delete, url))
                    seen = await removal_once(http, bank_id, facts)
                    assert (seen["action"], seen["fact_type"], seen["total"]) == (action, fact_type, facts)
                    assert seen["started_at"] <= seen["updated_at"]
                    assert not deleting.done(), "the delete is still under way"
                assert (await deleting).status_code == 200
            assert http.get(removal).status_code == 404, "the row goes with the delete"
        assert await conn.fetchval("SELECT count(*) FROM banks WHERE bank_id = $1", bank_id) == 0
    finally:
        await conn.close()


async def test_progress_moves_a_chunk_of_facts_at_a_time_seen_from_outside_the_delete(
    http: httpx.Client, bank_id: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    retain_harbour_days(http, bank_id)  # six facts in two documents
    monkeypatch.setattr(memories, "BANK_DELETE_CHUNK", 2)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=4)
    try:
        seen: list[tuple[int, int]] = []
        async with removal_progress(pool, bank_id, "clear") as advance:

            async def watched(done: int) -> None:
                await advance(done)
                row = await removal_under_way(pool, bank_id)  # another connection than the delete's
                seen.append((row["done"], row["total"]))

            assert await memories.clear_units(pool, bank_id, None, watched, import_wait=None) == 6
        assert seen == [(2, 6), (4, 6), (6, 6), (6, 6)], "three chunks of facts, then one of documents"
        assert await removal_under_way(pool, bank_id) is None
    finally:
        await pool.close()


async def test_a_removal_row_left_minutes_old_is_not_reported(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("INSERT INTO bank_removals (bank_id, action, done, total, updated_at)"
                           " VALUES ($1, 'delete', 3, 9, now() - interval '10 minutes')", bank_id)
        assert http.get(f"/v1/default/banks/{bank_id}/removal").status_code == 404
        await conn.execute("UPDATE bank_removals SET updated_at = now() WHERE bank_id = $1", bank_id)
        assert http.get(f"/v1/default/banks/{bank_id}/removal").json()["done"] == 3
    finally:
        await conn.execute("DELETE FROM bank_removals WHERE bank_id = $1", bank_id)
        await conn.close()


async def test_engram_bank_delete_draws_the_delete_as_it_goes(
    server: RunningServer, http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    retain_harbour_days(http, bank_id)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    async with held_at_the_end(pg_dsn, bank_id):
        cli = subprocess.Popen([sys.executable, "-m", "engram.cli", "--url", server.url, "bank", "delete", bank_id,
                                "--yes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        await removal_once(http, bank_id, 6)
        await asyncio.sleep(1.5)  # the command polls twice a second
        assert cli.poll() is None, "the delete waits at the entities"
    stdout, stderr = await asyncio.to_thread(cli.communicate, timeout=60)
    assert cli.returncode == 0, stderr
    assert f"deleting bank {bank_id}: 6/6 facts (100 %" in stderr
    assert stdout.strip() == f"deleted bank {bank_id}"
    assert bank_id not in {bank["bank_id"] for bank in http.get("/v1/default/banks").json()["banks"]}


async def test_a_progress_report_is_skipped_when_no_pooled_connection_comes(isolated_dsn: str, bank_id: str) -> None:
    """The delete reports from inside its transaction. With every pooled connection taken (by requests
    waiting for the very locks the delete holds), waiting for one hung the delete and them for good."""
    pool = await asyncpg.create_pool(isolated_dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        async with removal_progress(pool, bank_id, "delete") as advance:
            taken = await pool.acquire()  # every connection of the pool
            try:
                await asyncio.wait_for(advance(5), timeout=10)
                assert (await removal_under_way(taken, bank_id))["done"] == 0, "the report was skipped"
            finally:
                await pool.release(taken)
            await advance(7)
            assert (await removal_under_way(pool, bank_id))["done"] == 7, "the next report is made"
    finally:
        await pool.close()
