"""Retains into a bank while an import merges into it. The import holds the bank's writers lock and
its updated bank row for its whole transaction (minutes for a big archive), here taken by a
connection of the test as an import takes them (a restore creating the bank has inserted the row
instead). Queuing a retain does not wait for the bank row; a
queued retain into that bank is not claimed until the import ends, so it cannot sit in a worker slot
while other banks' operations wait; a synchronous one waits without a pooled connection, so twenty
of them cannot take every connection of the server; past ENGRAM_IMPORT_WAIT_SECONDS it
answers 503 having stored nothing."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx

from tests.conftest import RunningServer
from tests.support.import_holders import (
    ELSEWHERE,
    IMPORTING,
    eventually,
    import_done,
    operation_status,
    sessions_waiting_for_locks,
)

POOL_SIZE = 20  # the server's pooled connections (engram.store.pool.open_store)


def queued_retain(client: httpx.Client, bank_id: str, text: str) -> str:
    body = client.post(f"/v1/default/banks/{bank_id}/memories",
                       json={"items": [{"content": text}], "async": True}, timeout=10).json()
    return body["operation_id"]


def retained_texts(client: httpx.Client, bank_id: str) -> list[str]:
    items = client.get(f"/v1/default/banks/{bank_id}/memories/list", params={"limit": 100}).json()["items"]
    return sorted(item["text"] for item in items)


async def test_queued_retains_into_a_bank_being_imported_wait_unclaimed_while_other_banks_go_on(
    patient_server: RunningServer, import_under_way: asyncpg.Connection
) -> None:
    with patient_server.client() as client:
        # two, one for each of the worker's slots: claimed, each would wait there for the import
        held = [queued_retain(client, IMPORTING, f"Crate {n} of lamp oil reached the lighthouse.") for n in (1, 2)]
        other = queued_retain(client, ELSEWHERE, "Ines painted the harbour wall blue.")
        await eventually(lambda: operation_status(client, ELSEWHERE, other) == "completed")
        assert [operation_status(client, IMPORTING, op) for op in held] == ["pending", "pending"], \
            "not claimed while the import holds the bank"

        await import_done(import_under_way)
        for op in held:
            await eventually(lambda op=op: operation_status(client, IMPORTING, op) == "completed")
        assert retained_texts(client, IMPORTING) == [f"Crate {n} of lamp oil reached the lighthouse." for n in (1, 2)]


async def test_a_retain_queued_into_a_bank_a_restore_is_creating_is_accepted_at_once_and_runs_after_it(
    patient_server: RunningServer, restore_under_way: asyncpg.Connection
) -> None:
    with patient_server.client() as client:
        queued = queued_retain(client, IMPORTING, "Crate 4 of lamp oil reached the lighthouse.")
        await asyncio.sleep(1.0)
        assert operation_status(client, IMPORTING, queued) == "pending"

        await restore_under_way.execute("COMMIT")
        await eventually(lambda: operation_status(client, IMPORTING, queued) == "completed")
        assert retained_texts(client, IMPORTING) == ["Crate 4 of lamp oil reached the lighthouse."]
        mission = await restore_under_way.fetchval("SELECT mission FROM banks WHERE bank_id = $1", IMPORTING)
        assert mission == "Restored", "the retain went into the bank the restore made"


async def test_synchronous_retains_wait_for_the_import_without_taking_the_servers_connections(
    patient_server: RunningServer, import_under_way: asyncpg.Connection, isolated_dsn: str
) -> None:
    texts = [f"Barrel {n} of tar was stacked by the slipway." for n in range(POOL_SIZE)]
    with patient_server.client() as client, ThreadPoolExecutor(POOL_SIZE) as threads:
        assert client.post(f"/v1/default/banks/{ELSEWHERE}/memories",
                           json={"items": [{"content": "Ines painted the harbour wall blue."}]}).status_code == 200
        retains = [threads.submit(client.post, f"/v1/default/banks/{IMPORTING}/memories",
                                  json={"items": [{"content": text}]}) for text in texts]
        await asyncio.sleep(2.0)
        assert not any(retain.done() for retain in retains), "they wait for the import"

        assert await sessions_waiting_for_locks(isolated_dsn) == 0, "none waits holding a connection"
        recall = await asyncio.to_thread(client.post, f"/v1/default/banks/{ELSEWHERE}/memories/recall",
                                         json={"query": "Who painted the harbour wall?"}, timeout=10)
        assert "Ines painted the harbour wall blue" in recall.json()["results"][0]["text"], \
            "another bank's recall is answered meanwhile"

        await import_done(import_under_way)
        assert [(await asyncio.to_thread(retain.result, 60)).status_code for retain in retains] == [200] * POOL_SIZE
        assert retained_texts(client, IMPORTING) == sorted(texts)


async def test_changes_to_a_bank_being_imported_wait_for_it_without_a_connection(
    patient_server: RunningServer, import_under_way: asyncpg.Connection, isolated_dsn: str
) -> None:
    with patient_server.client() as client, ThreadPoolExecutor(2) as threads:
        changes = [threads.submit(client.patch, f"/v1/default/banks/{IMPORTING}/config",
                                  json={"updates": {"retain_chunk_size": 2000}}),
                   threads.submit(client.patch, f"/v1/default/banks/{IMPORTING}", json={"mission": "Keep the light"})]
        await asyncio.sleep(1.5)
        assert not any(change.done() for change in changes), "they wait for the import"
        assert await sessions_waiting_for_locks(isolated_dsn) == 0, "none waits holding a connection"

        await import_done(import_under_way)
        config, profile = [await asyncio.to_thread(change.result, 60) for change in changes]
        assert (config.status_code, profile.status_code) == (200, 200)
        assert config.json()["overrides"]["retain_chunk_size"] == 2000
        assert profile.json()["mission"] == "Keep the light"
        assert client.get(f"/v1/default/banks/{IMPORTING}/config").json()["overrides"]["retain_chunk_size"] == 2000


async def test_a_synchronous_retain_waits_no_longer_than_its_limit_and_stores_nothing(
    impatient_server: RunningServer, import_under_way: asyncpg.Connection
) -> None:
    with impatient_server.client() as client:
        started = time.monotonic()
        refused = await asyncio.to_thread(client.post, f"/v1/default/banks/{IMPORTING}/memories",
                                          json={"items": [{"content": "Crate 3 of lamp oil was lost."}]})
        waited = time.monotonic() - started
        assert refused.status_code == 503, refused.text
        assert "an import into bank 'importing' is under way" in refused.json()["detail"]
        assert refused.headers["Retry-After"]
        assert 1.0 <= waited < 10, f"it waited {waited:.1f} s"

        await import_done(import_under_way)
        assert retained_texts(client, IMPORTING) == [], "nothing of the refused retain was stored"
        again = client.post(f"/v1/default/banks/{IMPORTING}/memories",
                            json={"items": [{"content": "Crate 3 of lamp oil was lost."}]})
        assert again.status_code == 200 and retained_texts(client, IMPORTING) == ["Crate 3 of lamp oil was lost."]


async def test_a_change_to_a_bank_waits_no_longer_than_the_limit_and_changes_nothing(
    impatient_server: RunningServer, import_under_way: asyncpg.Connection
) -> None:
    with impatient_server.client() as client:
        refused = await asyncio.to_thread(client.patch, f"/v1/default/banks/{IMPORTING}/config",
                                          json={"updates": {"retain_chunk_size": 2000}})
        assert refused.status_code == 503, refused.text
        assert "under way and holds its writers; nothing was changed" in refused.json()["detail"]
        await import_done(import_under_way)
        assert "retain_chunk_size" not in client.get(f"/v1/default/banks/{IMPORTING}/config").json()["overrides"]
