"""Nothing acknowledged is lost: a sync retain answers only once its facts are committed, and an
async retain's operation id is returned only once the operation and its payload are committed —
so a server killed right after answering loses nothing, and another server finishes the work."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import asyncpg
import httpx

from tests.conftest import RunningServer, start_server


def query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """A fresh connection of its own, so only committed rows are visible."""

    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


def test_a_sync_retain_is_committed_before_it_answers(server: RunningServer, pg_dsn: str, bank_id: str) -> None:
    with server.client() as http:
        for round_ in range(5):
            text = f"Round {round_}: the ferry to Ithaca leaves at {7 + round_} o'clock. The captain is Nikos."
            response = http.post(f"/v1/default/banks/{bank_id}/memories",
                                 json={"items": [{"content": text, "document_id": f"ferry-{round_}"}]})
            assert response.status_code == 200, response.text
            # Straight after the 200, from another connection: the facts and their document are there.
            facts = query(pg_dsn, "SELECT text FROM memory_units WHERE bank_id = $1 AND document_id = $2",
                          bank_id, f"ferry-{round_}")
            assert len(facts) == 2, facts
            assert any(f"{7 + round_} o'clock" in row["text"] for row in facts)
            documents = query(pg_dsn, "SELECT id FROM documents WHERE bank_id = $1 AND id = $2", bank_id,
                              f"ferry-{round_}")
            assert len(documents) == 1


def test_an_async_retain_is_durable_once_its_operation_id_is_returned(isolated_dsn: str, bank_id: str) -> None:
    text = "The archive moved to the third floor on Monday. Priya holds the only key."
    idle = start_server(isolated_dsn, {"ENGRAM_WORKER_ENABLED": "false"}, name="durability-idle")
    try:
        response = httpx.post(f"{idle.url}/v1/default/banks/{bank_id}/memories",
                              json={"async": True, "items": [{"content": text, "tags": ["archive"]}]}, timeout=60)
        assert response.status_code == 200, response.text
    finally:
        idle.process.kill()  # no graceful shutdown: whatever was not committed is gone now
        idle.process.wait()
    operation_id = response.json()["operation_id"]

    (row,) = query(isolated_dsn, "SELECT status, bank_id, payload::text AS payload FROM async_operations WHERE id = $1",
                   operation_id)
    assert (row["status"], row["bank_id"]) == ("pending", bank_id)
    payload = json.loads(row["payload"])
    assert payload["items"][0]["content"] == text
    assert payload["items"][0]["tags"] == ["archive"]

    worker = start_server(isolated_dsn, name="durability-worker")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(f"{worker.url}/v1/default/banks/{bank_id}/operations/{operation_id}").json()["status"]
            if status in ("completed", "failed"):
                break
            time.sleep(0.2)
        assert status == "completed", worker.log()
    finally:
        worker.stop()
    facts = query(isolated_dsn, "SELECT text, tags FROM memory_units WHERE bank_id = $1 ORDER BY text", bank_id)
    assert [row["tags"] for row in facts] == [["archive"], ["archive"]]
    assert any("Priya" in row["text"] for row in facts)
