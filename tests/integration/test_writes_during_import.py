"""Writes other than retains into a bank while an import holds it (`tests.support.import_holders`).
Deleting or editing its documents and facts, clearing its observations, applying a template, adding a
directive: each waits for the import without a pooled connection, then applies; past
ENGRAM_IMPORT_WAIT_SECONDS it answers 503 having changed nothing. Begun beside the import instead, a
document delete waited on the entities the import had recounted while holding the facts it had
deleted, which the import then needed: PostgreSQL ended one of them as a deadlock's victim (a real
100,000-document merge failed so after 4 minutes). A consolidation, or another import into the bank,
is not claimed while the import holds it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import asyncpg
import httpx

from tests.conftest import RunningServer
from tests.support.import_holders import (
    ELSEWHERE,
    IMPORTING,
    begin_merge,
    eventually,
    import_done,
    operation_status,
    sessions_waiting_for_locks,
)

BANK = f"/v1/default/banks/{IMPORTING}"
HARBOUR, NETS = "Ines painted the harbour wall blue.", "Omar mended the nets on Tuesday."


def bank_with_two_documents(client: httpx.Client) -> dict[str, str]:
    """IMPORTING with the documents 'harbour' and 'nets', one fact each, mentioning entities; returns
    the fact id of each document."""
    for document_id, text in (("harbour", HARBOUR), ("nets", NETS)):
        stored = client.post(f"{BANK}/memories", json={"items": [{"content": text, "document_id": document_id}]})
        assert stored.status_code == 200, stored.text
    facts = client.get(f"{BANK}/memories/list", params={"limit": 10}).json()["items"]
    assert client.get(f"{BANK}/entities").json()["items"], "the facts mention entities"
    return {fact["document_id"]: fact["id"] for fact in facts}


@asynccontextmanager
async def merge_beside_two_documents(
    server: RunningServer, dsn: str
) -> AsyncIterator[tuple[httpx.Client, dict[str, str], asyncpg.Connection]]:
    """A client, the fact ids of `bank_with_two_documents`, and then a merge under way into the bank
    (rolled back at the end unless the test ended it)."""
    with server.client() as client:
        fact_of = bank_with_two_documents(client)
        holder = await begin_merge(dsn)
        try:
            yield client, fact_of, holder
        finally:
            if not holder.is_closed():
                await holder.close()


async def queued_consolidation(dsn: str, bank_id: str) -> str:
    """A consolidation queued as the server queues one (it needs an LLM to queue one itself)."""
    queuer = await asyncpg.connect(dsn)
    try:
        queued = await queuer.fetchval("INSERT INTO async_operations (id, bank_id, operation_type, payload)"
                                       " VALUES (gen_random_uuid(), $1, 'consolidation', '{}') RETURNING id", bank_id)
        return str(queued)
    finally:
        await queuer.close()


async def test_writes_to_a_bank_being_imported_wait_for_it_without_a_connection(
    patient_server: RunningServer, isolated_dsn: str
) -> None:
    async with merge_beside_two_documents(patient_server, isolated_dsn) as (client, fact_of, holder):
        with ThreadPoolExecutor(8) as threads:
            writes = {
                "delete a document": threads.submit(client.delete, f"{BANK}/documents/harbour"),
                "edit a fact's entities": threads.submit(client.patch, f"{BANK}/memories/{fact_of['nets']}",
                                                         json={"entities": ["Omar", "Fishing nets"]}),
                "retag a document": threads.submit(client.patch, f"{BANK}/documents/nets", json={"tags": ["boats"]}),
                "clear observations": threads.submit(client.delete, f"{BANK}/observations"),
                "clear experience facts": threads.submit(client.delete, f"{BANK}/memories",
                                                         params={"type": "experience"}),
                "retry failed consolidations": threads.submit(client.post, f"{BANK}/consolidation/recover"),
                "apply a template": threads.submit(client.post, f"{BANK}/import",
                                                   json={"version": "1", "bank": {"retain_chunk_size": 2000}}),
            }
            await asyncio.sleep(1.5)
            assert [name for name, write in writes.items() if write.done()] == [], "they wait for the import"
            assert await sessions_waiting_for_locks(isolated_dsn) == 0, "none waits holding a connection"

            await import_done(holder)
            answers = {name: await asyncio.to_thread(write.result, 60) for name, write in writes.items()}
            assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(writes, 200)
            assert client.get(f"{BANK}/documents/harbour").status_code == 404
            nets = client.get(f"{BANK}/memories/{fact_of['nets']}").json()
            assert sorted(nets["entities"]) == ["Fishing nets", "Omar"] and nets["tags"] == ["boats"]
            assert client.get(f"{BANK}/config").json()["overrides"]["retain_chunk_size"] == 2000


async def test_a_document_delete_beside_an_import_cannot_deadlock_it(
    patient_server: RunningServer, isolated_dsn: str
) -> None:
    async with merge_beside_two_documents(patient_server, isolated_dsn) as (client, fact_of, holder):
        with ThreadPoolExecutor(1) as threads:
            delete = threads.submit(client.delete, f"{BANK}/documents/harbour")
            await asyncio.sleep(1.5)
            # The import links a new fact to the old one, as its links' trigger does: it must get the fact.
            await holder.execute("SET statement_timeout = '10s'")
            linked = await holder.fetch("SELECT id FROM memory_units WHERE id = $1::uuid FOR KEY SHARE",
                                        fact_of["harbour"])
            assert [str(row["id"]) for row in linked] == [fact_of["harbour"]], "the import still sees the fact"
            await holder.execute("COMMIT")  # the import ends well

            deleted = await asyncio.to_thread(delete.result, 60)
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["memory_units_deleted"] == 1


async def test_a_delete_waits_no_longer_than_the_limit_and_deletes_nothing(
    impatient_server: RunningServer, isolated_dsn: str
) -> None:
    async with merge_beside_two_documents(impatient_server, isolated_dsn) as (client, _, holder):
        started = time.monotonic()
        refused = await asyncio.to_thread(client.delete, f"{BANK}/documents/harbour")
        assert refused.status_code == 503, refused.text
        assert "under way and holds its writers; nothing was deleted" in refused.json()["detail"]
        assert refused.headers["Retry-After"] and time.monotonic() - started < 10
        await import_done(holder)
        assert client.get(f"{BANK}/documents/harbour").status_code == 200, "the document is still there"


async def test_a_directive_for_a_bank_a_restore_is_creating_waits_without_a_connection(
    patient_server: RunningServer, restore_under_way: asyncpg.Connection, isolated_dsn: str
) -> None:
    with patient_server.client() as client, ThreadPoolExecutor(1) as threads:
        directive = threads.submit(client.post, f"{BANK}/directives",
                                   json={"name": "brief", "content": "Answer in one sentence."})
        files = client.post(f"{BANK}/files/retain", files={"files": ("nets.txt", NETS.encode(), "text/plain")},
                            data={"request": "{}"}, timeout=10)
        assert files.status_code == 200, "a file is queued at once"
        await asyncio.sleep(1.5)
        assert not directive.done(), "it waits for the restore"
        assert await sessions_waiting_for_locks(isolated_dsn) == 0, "it waits holding no connection"

        await restore_under_way.execute("COMMIT")
        assert (await asyncio.to_thread(directive.result, 60)).status_code == 200
        assert [d["name"] for d in client.get(f"{BANK}/directives").json()["items"]] == ["brief"]
        mission = await restore_under_way.fetchval("SELECT mission FROM banks WHERE bank_id = $1", IMPORTING)
        assert mission == "Restored", "into the bank the restore made"
        [file_operation] = files.json()["operation_ids"]
        await eventually(lambda: operation_status(client, IMPORTING, file_operation) == "completed")


async def test_consolidations_and_imports_into_a_bank_being_imported_are_not_claimed(
    patient_server: RunningServer, restore_under_way: asyncpg.Connection, isolated_dsn: str
) -> None:
    with patient_server.client() as client:
        assert client.post(f"/v1/default/banks/{ELSEWHERE}/memories",
                           json={"items": [{"content": HARBOUR}]}).status_code == 200
        clone = client.post(f"/v1/default/banks/{ELSEWHERE}/clone", params={"target_bank_id": IMPORTING})
        assert clone.status_code == 202, clone.text
        consolidations = {bank: await queued_consolidation(isolated_dsn, bank) for bank in (IMPORTING, ELSEWHERE)}
        # Without an LLM a consolidation fails at once: once claimed, it is no longer pending.
        await eventually(lambda: operation_status(client, ELSEWHERE, consolidations[ELSEWHERE]) != "pending")
        await asyncio.sleep(1.0)
        assert operation_status(client, ELSEWHERE, clone.json()["operation_id"]) == "pending", \
            "the clone into the bank being restored waits unclaimed"
        assert operation_status(client, IMPORTING, consolidations[IMPORTING]) == "pending"

        await restore_under_way.execute("COMMIT")
        for bank, operation in ((ELSEWHERE, clone.json()["operation_id"]), (IMPORTING, consolidations[IMPORTING])):
            await eventually(lambda bank=bank, operation=operation: operation_status(client, bank, operation)
                             in ("completed", "failed"))
