"""An import under way, played by a connection of the test: it takes what an import into a bank takes
for its whole transaction (minutes for a big archive), so tests can look at what other requests do
meanwhile. Also the looks those tests share: sessions waiting on locks, operations' statuses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import asyncpg
import httpx

from engram.store import writer_locks
from tests.conftest import RunningServer, start_server

IMPORTING, ELSEWHERE = "importing", "elsewhere"

# Sessions waiting for a lock: a request that waited in its transaction (for the writers lock, or for a
# row the import holds) held a pooled connection meanwhile.
WAITING_FOR_LOCKS = "SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted"


async def begin_merge(dsn: str, bank_id: str = IMPORTING) -> asyncpg.Connection:
    """A connection in a transaction holding what an import merging into the (existing) bank holds
    (`importer.import_archive`): the writers lock, the bank's row, and the bank's entities, whose
    mentions a merge recounts."""
    holder = await asyncpg.connect(dsn)
    await holder.execute("BEGIN")
    await writer_locks.hold_bank_writers(holder, bank_id)
    await holder.execute("UPDATE banks SET mission = 'Merged from an archive' WHERE bank_id = $1", bank_id)
    await holder.execute("UPDATE entities SET mention_count = mention_count WHERE bank_id = $1", bank_id)
    return holder


async def begin_restore(dsn: str, bank_id: str = IMPORTING) -> asyncpg.Connection:
    """A connection in a transaction holding the writers lock, then the bank's row inserted, as a
    restore creating the bank does."""
    holder = await asyncpg.connect(dsn)
    await holder.execute("BEGIN")
    await writer_locks.hold_bank_writers(holder, bank_id)
    await holder.execute("INSERT INTO banks (bank_id, name, mission) VALUES ($1, $1, 'Restored')", bank_id)
    return holder


async def begin_write(dsn: str, bank_id: str, *, alone: bool = False) -> asyncpg.Connection:
    """A connection in a transaction that has entered the bank as a write does (`writer_locks.enter_bank`):
    a retain of new documents (the changes lock shared), or a write that goes alone."""
    holder = await asyncpg.connect(dsn)
    await holder.execute("BEGIN")
    assert await writer_locks.enter_bank(holder, bank_id, make_bank=False, alone=alone, wait=True) == \
        writer_locks.ENTERED
    return holder


async def import_done(holder: asyncpg.Connection) -> None:
    """The import ends: its locks go with the session (rolled back; a restore's test commits instead)."""
    await holder.close()


async def sessions_waiting_for_locks(dsn: str) -> int:
    looker = await asyncpg.connect(dsn)
    try:
        return await looker.fetchval(WAITING_FOR_LOCKS)
    finally:
        await looker.close()


async def waiting_sessions_for(dsn: str, seconds: float) -> set[int]:
    """The numbers of sessions waiting on a lock, looked at every 0.1 s for `seconds`."""
    seen = set()
    for _ in range(int(seconds * 10)):
        seen.add(await sessions_waiting_for_locks(dsn))
        await asyncio.sleep(0.1)
    return seen


def operation_status(client: httpx.Client, bank_id: str, operation_id: str) -> str:
    return client.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json()["status"]


async def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.2)


def server_waiting(dsn: str, name: str, env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    """A server for a fixture, stopped afterwards."""
    running = start_server(dsn, env, name=name)
    try:
        yield running
    finally:
        running.stop()
