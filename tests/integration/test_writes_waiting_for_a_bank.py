"""Writes that wait for a bank's changes lock (`writer_locks.writing_to_bank`). A connection of the test
plays a write under way: it holds what that write's first statement takes. A bank's delete waits for
it like any write that changes the bank, and a retain after the delete makes the bank again instead of
failing on its first document's key. Writers kept waiting queue in the server, one of them in
PostgreSQL: each waiting on a pooled connection of its own, thirty took every connection. A queued
retain whose document another writer changed between its plan and its write is planned again."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import asyncpg

from engram.store import writer_locks
from tests.conftest import RunningServer
from tests.support.import_holders import (
    begin_write,
    eventually,
    operation_status,
    sessions_waiting_for_locks,
    waiting_sessions_for,
)

BUSY = "busy"
BANK = f"/v1/default/banks/{BUSY}"


async def test_a_bank_delete_waits_for_the_writes_under_way_and_a_retain_after_it_makes_the_bank_again(
    patient_server: RunningServer, isolated_dsn: str
) -> None:
    with patient_server.client() as client, ThreadPoolExecutor(2) as threads:
        stored = client.post(f"{BANK}/memories", json={"items": [{"content": "Ines painted the harbour wall.",
                                                                   "document_id": "before"}]})
        assert stored.status_code == 200, stored.text
        holder = await begin_write(isolated_dsn, BUSY)
        try:
            deleting = threads.submit(client.delete, BANK)
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) == 1)
            retaining = threads.submit(client.post, f"{BANK}/memories", json={
                "items": [{"content": "Omar mended the nets on Tuesday.", "document_id": "after"}]})
            # the retain queues behind the delete in the server, without a session of its own waiting
            assert await waiting_sessions_for(isolated_dsn, 1.5) == {1}
            assert not deleting.done() and not retaining.done(), "both wait for the write under way"
        finally:
            await holder.close()  # the write under way ends
        assert deleting.result(timeout=60).status_code == 200, deleting.result().text
        retained = retaining.result(timeout=60)
        assert retained.status_code == 200, retained.text
        documents = client.get(f"{BANK}/documents").json()["items"]
        assert [document["id"] for document in documents] == ["after"], "the bank made again holds the retain alone"


async def test_writes_kept_waiting_for_a_bank_hold_one_connection_between_them(
    patient_server: RunningServer, isolated_dsn: str
) -> None:
    with patient_server.client() as client, ThreadPoolExecutor(8) as threads:
        items = [{"content": f"Farid sold {n} nets at the market.", "document_id": f"d{n}"} for n in range(8)]
        assert client.post(f"{BANK}/memories", json={"items": items}).status_code == 200
        facts = client.get(f"{BANK}/memories/list", params={"limit": 8}).json()["items"]
        assert len(facts) == 8
        holder = await begin_write(isolated_dsn, BUSY)
        try:
            edits = [threads.submit(client.patch, f"{BANK}/memories/{fact['id']}",
                                    json={"text": f"Greta counted {n} boats at dawn."})
                     for n, fact in enumerate(facts)]
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) >= 1)
            assert await waiting_sessions_for(isolated_dsn, 1.5) == {1}, "one edit waits in PostgreSQL"
            assert not any(edit.done() for edit in edits), "every edit waits for the write under way"
            other = client.post("/v1/default/banks/elsewhere/memories", json={"items": [{"content": "Hugo rowed."}]})
            assert other.status_code == 200, other.text  # another bank's writes go on
        finally:
            await holder.close()
        assert [edit.result(timeout=60).status_code for edit in edits] == [200] * 8
        texts = {fact["text"] for fact in client.get(f"{BANK}/memories/list", params={"limit": 8}).json()["items"]}
        assert texts == {f"Greta counted {n} boats at dawn." for n in range(8)}


async def test_a_queued_retain_of_a_document_changed_meanwhile_is_planned_again(
    patient_server: RunningServer, isolated_dsn: str
) -> None:
    with patient_server.client() as client:
        stored = client.post(f"{BANK}/memories", json={"items": [{"content": "Ines painted the harbour wall.",
                                                                   "document_id": "wall"}]})
        assert stored.status_code == 200, stored.text
        # Another writer holds the document and adds a chunk to it, not committed yet.
        holder = await asyncpg.connect(isolated_dsn)
        try:
            await holder.execute("BEGIN")
            await writer_locks.lock_documents(holder, BUSY, ["wall"])
            await holder.execute(
                "INSERT INTO chunks (id, bank_id, document_id, chunk_index, chunk_text, content_hash)"
                " VALUES ('wall-extra', $1, 'wall', 1, 'A second coat dried overnight.', 'x')", BUSY)
            queued = client.post(f"{BANK}/memories", json={"async": True, "items": [
                {"content": "Ines painted the harbour wall green.", "document_id": "wall"}]})
            assert queued.status_code == 200, queued.text
            operation_id = queued.json()["operation_id"]
            # planned on the document as committed, the retain waits for the document's lock to write
            await eventually(lambda: asyncio.run(sessions_waiting_for_locks(isolated_dsn)) == 1)
            await holder.execute("COMMIT")
        finally:
            await holder.close()
        await eventually(lambda: operation_status(client, BUSY, operation_id) in ("completed", "failed"))
        operation = client.get(f"{BANK}/operations/{operation_id}").json()
        assert operation["status"] == "completed", operation
        chunks = client.get(f"{BANK}/documents/wall/chunks").json()["items"]
        assert [chunk["chunk_text"] for chunk in chunks] == ["Ines painted the harbour wall green."]
