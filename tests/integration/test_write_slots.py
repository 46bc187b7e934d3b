"""Retains write to PostgreSQL a few at a time in a server (`store.write_slots`), and a retain waiting for
its bank (for another writer, or for an import) holds no slot meanwhile. The server here has one slot.

Thirty writers at once each kept a backend busy, and a recall of another bank sharing the two cores
with all of them took ~7 times as long as alone. A retain holding a slot while it waited for its
bank would hold up every other bank's retains for as long as that bank stays busy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from engram.store import write_slots, writer_locks
from tests.conftest import RunningServer
from tests.support.import_holders import (
    IMPORTING,
    begin_write,
    eventually,
    server_waiting,
    sessions_waiting_for_locks,
    waiting_sessions_for,
)

API = "/v1/default/banks"


@pytest.fixture
def one_slot_server(isolated_dsn: str) -> Iterator[RunningServer]:
    yield from server_waiting(isolated_dsn, "one-slot", {"ENGRAM_RETAIN_WRITE_SLOTS": "1"})


def retain(client: httpx.Client, bank_id: str, text: str) -> int:
    return client.post(f"{API}/{bank_id}/memories", json={"items": [{"content": text}]}).status_code


async def test_a_retain_holding_the_only_slot_keeps_other_banks_retains_waiting(
    one_slot_server: RunningServer, isolated_dsn: str
) -> None:
    """The first retain takes the slot, then waits inside its transaction for an entity name's lock,
    which a connection of the test holds: another bank's retain waits for the slot."""
    with one_slot_server.client() as client, ThreadPoolExecutor(2) as threads:
        holder = await begin_write(isolated_dsn, "named", alone=False)
        try:
            await writer_locks.lock_names(holder, "named", ["ana"])
            first = threads.submit(retain, client, "named", "Ana repaired the lighthouse lamp.")
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) == 1)
            second = threads.submit(retain, client, "other", "Bruno painted the ferry blue.")
            await asyncio.sleep(1.5)
            assert not second.done(), "the other bank's retain waits for the slot"
        finally:
            await holder.close()
        assert first.result(timeout=60) == 200
        assert second.result(timeout=60) == 200


async def test_a_retain_waiting_for_its_banks_other_writer_holds_no_slot(
    one_slot_server: RunningServer, isolated_dsn: str
) -> None:
    with one_slot_server.client() as client, ThreadPoolExecutor(2) as threads:
        holder = await begin_write(isolated_dsn, "busy", alone=True)  # a write that goes alone, under way
        try:
            waiting = threads.submit(retain, client, "busy", "Carla mended the harbour nets.")
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) == 1)
            assert threads.submit(retain, client, "other", "Dario sold the old boat.").result(timeout=30) == 200
            assert not waiting.done()
        finally:
            await holder.close()
        assert waiting.result(timeout=60) == 200


async def test_a_retain_waiting_for_an_import_holds_no_slot(
    one_slot_server: RunningServer, import_under_way: asyncpg.Connection
) -> None:
    with one_slot_server.client() as client, ThreadPoolExecutor(2) as threads:
        waiting = threads.submit(retain, client, IMPORTING, "Elena counted the gulls on the pier.")
        await asyncio.sleep(1)  # it waits for the import, looking every second
        assert threads.submit(retain, client, "other", "Farid tarred the rope.").result(timeout=30) == 200
        assert not waiting.done()
        await import_under_way.close()  # the import ends
        assert waiting.result(timeout=60) == 200


async def test_large_retains_have_slots_of_their_own(one_slot_server: RunningServer, isolated_dsn: str) -> None:
    """A large retain (`LARGE_RETAIN_CHARS`) holding its class's only slot, waiting for a name's lock,
    keeps the next large retain waiting but not a small one: four 300,000-character documents would
    otherwise hold every slot for the ~16 s each takes."""
    story = " ".join(f"Ana carried crate {n} up the harbour steps." for n in range(600))
    assert len(story) >= write_slots.LARGE_RETAIN_CHARS
    with one_slot_server.client() as client, ThreadPoolExecutor(3) as threads:
        holder = await begin_write(isolated_dsn, "named", alone=False)
        try:
            await writer_locks.lock_names(holder, "named", ["ana"])
            await writer_locks.lock_names(holder, "large", ["hugo"])  # what the second one would wait for
            first = threads.submit(retain, client, "named", story)
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) == 1, timeout=60)
            assert threads.submit(retain, client, "other", "Greta fed the cats.").result(timeout=30) == 200
            second = threads.submit(retain, client, "large", story.replace("Ana", "Hugo"))
            assert await waiting_sessions_for(isolated_dsn, 5) == {1}, "the second waits for a slot, not in PostgreSQL"
            assert not second.done()
        finally:
            await holder.close()
        assert first.result(timeout=120) == 200
        assert second.result(timeout=120) == 200
