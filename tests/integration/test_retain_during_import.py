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
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from engram.store import writer_locks
from tests.conftest import RunningServer, start_server

IMPORTING, ELSEWHERE = "importing", "elsewhere"
POOL_SIZE = 20  # the server's pooled connections (engram.store.pool.open_store)

# Sessions waiting for a lock: a retain that waited in its transaction (for the writers lock, or for
# the bank row the first one inserted) held a pooled connection meanwhile.
WAITING_FOR_LOCKS = "SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted"


async def sessions_waiting_for_locks(dsn: str) -> int:
    looker = await asyncpg.connect(dsn)
    try:
        return await looker.fetchval(WAITING_FOR_LOCKS)
    finally:
        await looker.close()


def operation_status(client: httpx.Client, bank_id: str, operation_id: str) -> str:
    return client.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json()["status"]


def queued_retain(client: httpx.Client, bank_id: str, text: str) -> str:
    body = client.post(f"/v1/default/banks/{bank_id}/memories",
                       json={"items": [{"content": text}], "async": True}, timeout=10).json()
    return body["operation_id"]


def retained_texts(client: httpx.Client, bank_id: str) -> list[str]:
    items = client.get(f"/v1/default/banks/{bank_id}/memories/list", params={"limit": 100}).json()["items"]
    return sorted(item["text"] for item in items)


async def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.2)


@pytest.fixture
async def import_under_way(isolated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection in a transaction holding the writers lock of IMPORTING, then its bank row, as an
    import merging into the bank does (`importer.import_archive`)."""
    holder = await asyncpg.connect(isolated_dsn)
    await holder.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", IMPORTING)
    transaction = holder.transaction()
    await transaction.start()
    await writer_locks.hold_bank_writers(holder, IMPORTING)
    await holder.execute("UPDATE banks SET mission = 'Restored from an archive' WHERE bank_id = $1", IMPORTING)
    try:
        yield holder
    finally:
        if not holder.is_closed():
            await transaction.rollback()
            await holder.close()


@pytest.fixture
async def restore_under_way(isolated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection in a transaction holding the writers lock of IMPORTING, then its bank row inserted,
    as a restore creating the bank does."""
    holder = await asyncpg.connect(isolated_dsn)
    await holder.execute("BEGIN")
    await writer_locks.hold_bank_writers(holder, IMPORTING)
    await holder.execute("INSERT INTO banks (bank_id, name, mission) VALUES ($1, $1, 'Restored')", IMPORTING)
    try:
        yield holder
    finally:
        await holder.close()  # uncommitted: rolled back


async def import_done(holder: asyncpg.Connection) -> None:
    await holder.close()  # the lock goes with the session, as with an import's commit


def server_waiting(dsn: str, name: str, env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    running = start_server(dsn, env, name=name)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def patient_server(isolated_dsn: str) -> Iterator[RunningServer]:
    """A server whose requests wait the default minute for an import."""
    yield from server_waiting(isolated_dsn, "retain-during-import")


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


@pytest.fixture
def impatient_server(isolated_dsn: str) -> Iterator[RunningServer]:
    """A server whose requests wait one second for an import."""
    yield from server_waiting(isolated_dsn, "retain-import-wait", {"ENGRAM_IMPORT_WAIT_SECONDS": "1"})


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
