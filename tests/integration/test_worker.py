"""The operations queue across processes: a separate `engram worker` picks up what a server without a
worker accepted, and an operation left `processing` by a dead worker is reclaimed after its lease."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid

import asyncpg
import httpx
import pytest

from tests.conftest import ARTIFACTS, start_server


def wait_for_status(client: httpx.Client, bank_id: str, operation_id: str, want: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json()
        if body["status"] == want:
            return body
        time.sleep(0.1)
    raise AssertionError(f"operation {operation_id} never became {want}: {body}")


def test_a_separate_worker_process_runs_queued_operations(isolated_dsn: str, bank_id: str) -> None:
    server = start_server(isolated_dsn, {"ENGRAM_WORKER_ENABLED": "false"}, name="no-worker")
    worker = None
    try:
        with server.client() as client:
            accepted = client.post(
                f"/v1/default/banks/{bank_id}/memories",
                json={"items": [{"content": "Nadia repaired the lighthouse lamp in October."}], "async": True},
            ).json()
            time.sleep(0.5)
            status = client.get(f"/v1/default/banks/{bank_id}/operations/{accepted['operation_id']}").json()
            assert status["status"] == "pending", "nobody works in a server started without a worker"

            env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
            env["ENGRAM_DATABASE_URL"] = isolated_dsn
            log = (ARTIFACTS / f"worker-{bank_id}.log").open("wb")
            worker = subprocess.Popen([sys.executable, "-m", "engram.cli", "worker"], env=env, stdout=log,
                                      stderr=subprocess.STDOUT)
            done = wait_for_status(client, bank_id, accepted["operation_id"], "completed")
            assert done["result_metadata"]["facts"] == 1
            listed = client.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]
            assert len(listed) == 1 and listed[0]["text"].startswith("Nadia repaired the lighthouse lamp")
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=15)
        server.stop()


async def test_an_operation_abandoned_by_a_dead_worker_is_reclaimed(pg_dsn: str, server, bank_id: str) -> None:
    operation_id = uuid.uuid4()
    payload = {"items": [{"content": "Omar planted forty olive trees on the hill."}], "document_tags": None}
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank_id)
        # What a worker killed mid-operation leaves behind: `processing`, its lease already expired.
        await conn.execute(
            """
            INSERT INTO async_operations (id, bank_id, operation_type, status, payload, items_count, worker_id,
                                          lease_expires_at, started_at)
            VALUES ($1, $2, 'retain', 'processing', $3::jsonb, 1, 'dead-worker', now() - interval '1 second', now())
            """,
            operation_id,
            bank_id,
            json.dumps(payload),
        )
    finally:
        await conn.close()
    with server.client() as client:
        done = wait_for_status(client, bank_id, str(operation_id), "completed")
        assert done["status"] == "completed"
        texts = [m["text"] for m in client.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]]
        assert len(texts) == 1 and texts[0].startswith("Omar planted forty olive trees"), "stored exactly once"


async def test_a_worker_that_lost_its_lease_records_nothing_when_it_resumes(isolated_dsn: str, bank_id: str) -> None:
    """A worker frozen past its lease, whose operation another worker took over and completed, finishes
    later: its outcome must not overwrite the other's, nor complete the operation (and fire its webhook) twice."""
    from engram.services import Services
    from engram.settings import Settings
    from engram.store.pool import open_store
    from engram.worker.runner import Worker

    store = await open_store(Settings.from_env({"ENGRAM_DATABASE_URL": isolated_dsn}))
    try:
        frozen = Worker(Services(settings=Settings.from_env({}), store=store))
        operation_id = await running_operation(store.pool, bank_id, frozen.holder(0), lease_left_s=-1)
        as_frozen_claimed = await store.pool.fetchrow("SELECT * FROM async_operations WHERE id = $1", operation_id)
        other = Worker(Services(settings=Settings.from_env({}), store=store))
        claimed = await ops_claim(store.pool, other.holder(0))
        assert claimed == operation_id, "the expired lease let the other worker take the operation"
        as_other_claimed = await store.pool.fetchrow("SELECT * FROM async_operations WHERE id = $1", operation_id)
        await other._finish(as_other_claimed, {"facts": 1, "by": "other"}, None)

        await frozen._finish(as_frozen_claimed, None, "frozen worker's late failure")  # it resumes
        await frozen._finish(as_frozen_claimed, {"facts": 9, "by": "frozen"}, None)
        row = await store.pool.fetchrow("SELECT status, result, error_message FROM async_operations WHERE id = $1",
                                        operation_id)
        assert (row["status"], row["result"], row["error_message"]) == ("completed", {"facts": 1, "by": "other"}, None)
    finally:
        await store.close()


async def test_a_worker_keeps_its_lease_when_every_pooled_connection_is_taken(
    isolated_dsn: str, bank_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until session 31, twenty requests waiting for an import held every pooled connection; a live
    worker's lease renewal waited with them, the lease ran out, and a second slot claimed the operation
    and ran it again. A renewal that gets no pooled connection in time uses one of its own."""
    from engram.services import Services
    from engram.settings import Settings
    from engram.store.pool import open_store
    from engram.worker import runner

    monkeypatch.setattr(runner, "LEASE_POOL_WAIT_S", 0.5)
    store = await open_store(Settings.from_env({"ENGRAM_DATABASE_URL": isolated_dsn}))
    try:
        worker = runner.Worker(Services(settings=Settings.from_env({}), store=store))
        operation_id = await running_operation(store.pool, bank_id, worker.holder(0), lease_left_s=2)
        taken = [await store.pool.acquire() for _ in range(store.pool.get_max_size())]
        try:
            await asyncio.wait_for(worker.extend_lease(operation_id, 60, worker.holder(0)), 10)
            left = await taken[0].fetchval(
                "SELECT extract(epoch FROM lease_expires_at - now()) FROM async_operations WHERE id = $1", operation_id)
        finally:
            for conn in taken:
                await store.pool.release(conn)
        assert left > 50, "the lease was extended by a minute"
        await asyncio.sleep(2.5)  # past the lease it had
        assert await ops_claim(store.pool, "another worker") is None, "no other worker can take it"
    finally:
        await store.close()


async def test_a_slot_that_lost_its_lease_to_another_slot_of_its_worker_writes_nothing(
    isolated_dsn: str, bank_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slot 0 runs a retain past its lease; slot 1 of the same worker takes it over. Slot 0's claim check
    must then refuse its write, and its outcome must not be recorded, as for a slot of another process:
    until session 35 the slots shared one id, and both wrote the operation."""
    from engram.errors import ClaimLost
    from engram.services import Services
    from engram.settings import Settings
    from engram.store.pool import open_store
    from engram.store.writer_locks import check_claim
    from engram.worker import handlers
    from engram.worker.runner import Worker

    started = [asyncio.Event(), asyncio.Event()]
    release = [asyncio.Event(), asyncio.Event()]
    checks: list[str] = []

    async def held_retain(services: Services, operation: asyncpg.Record, progress: object) -> dict:
        run = sum(event.is_set() for event in started)
        started[run].set()
        await release[run].wait()
        try:  # what a write for the operation checks once it holds the bank's locks
            await check_claim(services.pool, handlers.claim_of(operation))
            checks.append("held")
        except ClaimLost:
            checks.append("lost")
        return {"facts": 1, "run": run}

    monkeypatch.setitem(handlers.HANDLERS, "retain", held_retain)
    store = await open_store(Settings.from_env({"ENGRAM_DATABASE_URL": isolated_dsn}))
    try:
        worker = Worker(Services(settings=Settings.from_env({}), store=store))
        operation_id = uuid.uuid4()
        await store.pool.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank_id)
        await store.pool.execute(
            "INSERT INTO async_operations (id, bank_id, operation_type, status, payload, items_count)"
            " VALUES ($1, $2, 'retain', 'pending', '{}'::jsonb, 1)", operation_id, bank_id)
        first = asyncio.create_task(worker.run_one(0))
        await asyncio.wait_for(started[0].wait(), 10)
        await store.pool.execute(  # slot 0 stalls past its lease
            "UPDATE async_operations SET lease_expires_at = now() - interval '1 second' WHERE id = $1", operation_id)
        second = asyncio.create_task(worker.run_one(1))
        await asyncio.wait_for(started[1].wait(), 10)

        release[0].set()
        await asyncio.wait_for(first, 10)
        row = await store.pool.fetchrow("SELECT status, result FROM async_operations WHERE id = $1", operation_id)
        assert checks == ["lost"], "slot 0's write is refused: slot 1 holds the operation"
        assert row["status"] == "processing" and row["result"] is None, f"slot 0's outcome is not recorded: {row}"

        release[1].set()
        await asyncio.wait_for(second, 10)
        row = await store.pool.fetchrow("SELECT status, result FROM async_operations WHERE id = $1", operation_id)
        assert checks == ["lost", "held"] and (row["status"], row["result"]) == ("completed", {"facts": 1, "run": 1})
    finally:
        for event in release:
            event.set()
        await store.close()


async def test_idle_slots_poll_on_one_timer_yet_take_what_another_process_queues_together(
    isolated_dsn: str, bank_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker of ten slots (a server with an LLM) polls once an interval while idle, not ten times:
    one idle slot keeps the timer, the others wait to be woken, and a wake-up sends one of them, not
    all ten. Operations another process queues (no wake-up reaches this one) are still taken by as
    many slots as there are operations: each claim sends another slot to the queue."""
    from engram.services import Services
    from engram.settings import Settings
    from engram.store import operations as ops
    from engram.store.pool import open_store
    from engram.worker import handlers, runner

    claims = 0
    real_claim = ops.claim_next

    async def counted_claim(*args: object) -> asyncpg.Record | None:
        nonlocal claims
        claims += 1
        return await real_claim(*args)

    started, release = [], asyncio.Event()

    async def held_retain(services: Services, operation: asyncpg.Record, progress: object) -> dict:
        started.append(operation["id"])
        await release.wait()
        return {"facts": 0}

    monkeypatch.setattr(runner.ops, "claim_next", counted_claim)
    monkeypatch.setitem(handlers.HANDLERS, "retain", held_retain)
    store = await open_store(Settings.from_env({"ENGRAM_DATABASE_URL": isolated_dsn}))
    worker = runner.Worker(Services(settings=Settings.from_env({"ENGRAM_WORKER_POLL_INTERVAL": "0.2"}), store=store),
                           concurrency=10)
    try:
        await worker.start()
        await asyncio.sleep(0.5)  # every slot has polled once and gone idle
        claims = 0
        await asyncio.sleep(1.0)
        assert claims <= 8, f"{claims} claims in a second of idling at a 0.2 s interval"
        claims = 0
        worker.wake()
        await asyncio.sleep(0.1)
        assert claims <= 2, f"one wake-up with nothing queued made {claims} claims"

        await store.pool.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank_id)
        queued = [uuid.uuid4() for _ in range(4)]
        for operation_id in queued:  # as another process queues them: no wake-up here
            await store.pool.execute(
                "INSERT INTO async_operations (id, bank_id, operation_type, status, payload, items_count)"
                " VALUES ($1, $2, 'retain', 'pending', '{}'::jsonb, 1)", operation_id, bank_id)
        deadline = time.monotonic() + 5
        while len(started) < len(queued) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sorted(started) == sorted(queued), "each operation runs in a slot of its own, at once"
    finally:
        release.set()
        await worker.stop()
        await store.close()


async def running_operation(pool: asyncpg.Pool, bank_id: str, worker_id: str, lease_left_s: float) -> uuid.UUID:
    """A retain of a new bank, being run by `worker_id`, its lease ending `lease_left_s` from now."""
    operation_id = uuid.uuid4()
    await pool.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank_id)
    await pool.execute(
        "INSERT INTO async_operations (id, bank_id, operation_type, status, payload, items_count, worker_id,"
        " lease_expires_at, started_at) VALUES ($1, $2, 'retain', 'processing', '{}'::jsonb, 1, $3,"
        " now() + make_interval(secs => $4), now())",
        operation_id, bank_id, worker_id, lease_left_s,
    )
    return operation_id


async def ops_claim(pool: asyncpg.Pool, worker_id: str) -> uuid.UUID | None:
    from engram.store import operations as ops

    claimed = await ops.claim_next(pool, worker_id, 30)
    return claimed["id"] if claimed else None
