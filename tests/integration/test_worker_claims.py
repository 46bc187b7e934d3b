"""A worker writes for a queued operation (a retain, a consolidation, an import) only while it still
holds the operation (`writer_locks.Claim`, `check_claim`), and a reprocess reads its document's text
once its turn comes (`retain.document_turns`).

The scripted LLM holds a retain's extraction or a consolidation's call, or a connection of the test
holds the bank's locks, so the worker has claimed the operation and not yet written when the test
deletes the bank, or hands the operation to another worker (as a claim after the lease ran out
does). Before the claim was checked, the worker wrote anyway: into the bank made again after its
delete, or a second time beside the worker that took it over."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from tests.conftest import RunningServer, scripted_server
from tests.integration.test_transfer import export_archive
from tests.support.faults import (
    API,
    Model,
    consolidation_id,
    extracted,
    facts,
    observations,
    operation,
    operations,
    retain_async,
    wait_for_llm_call,
    wait_terminal,
)
from tests.support.import_holders import begin_write, eventually, sessions_waiting_for_locks
from tests.support.scripted_llm import ChatRequest, ScriptedLLM
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def claims_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    # Two worker slots: a test holds both to keep an operation queued.
    with scripted_server(pg_dsn, scripted_llm, "claims", ENGRAM_LLM_TIMEOUT="30",
                         ENGRAM_WORKER_MAX_SLOTS="2") as running:
        yield running


@pytest.fixture
def http(claims_server: tuple[RunningServer, str]) -> Iterator[httpx.Client]:
    with claims_server[0].client() as client:
        yield client


class HeldAnswer:
    """The LLM's answer to a prompt holding `marker` (an extraction, or a consolidation with
    `consolidation`) comes only once `release()` is called; every other answer is a healthy one."""

    def __init__(self, llm: ScriptedLLM, *, consolidation: bool = False) -> None:
        self.marker = uuid.uuid4().hex[:8]
        self._released = threading.Event()
        model = Model(llm)
        self._healthy = model.consolidate if consolidation else extracted
        setattr(model, "consolidation_fault" if consolidation else "retain_fault", self._answer)

    def _answer(self, request: ChatRequest) -> dict | None:
        if self.marker not in request.user_text:
            return None
        self._released.wait(30)
        return self._healthy(request)

    def release(self) -> None:
        self._released.set()


async def hand_over(dsn: str, operation_id: str) -> None:
    """What another worker's claim does once the operation's lease has run out."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE async_operations SET worker_id = 'another-worker' WHERE id = $1",
                           uuid.UUID(operation_id))
    finally:
        await conn.close()


def queued_retain_held(http: httpx.Client, llm: ScriptedLLM, bank_id: str, text: str) -> tuple[HeldAnswer, str]:
    """A retain queued with `text` ("{marker}" in it), claimed by the worker, whose extraction waits for
    `release()`; and its operation's id."""
    held = HeldAnswer(llm)
    operation_id = retain_async(http, bank_id, text.format(marker=held.marker))
    wait_for_llm_call(llm, held.marker)  # claimed, and extracting
    return held, operation_id


def wait_for_the_worker_to_drop(server: RunningServer, operation_id: str) -> None:
    """The worker's failure is not recorded (the operation is not its own any more); its log says so."""
    wait_for(lambda: f"no longer holds operation {operation_id}" in server.log(),
             f"the worker to give operation {operation_id} up")


def test_a_queued_retain_claimed_before_its_bank_is_deleted_does_not_make_the_bank_again(
    claims_server: tuple[RunningServer, str], http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    server, _ = claims_server
    held, operation_id = queued_retain_held(http, llm, bank_id, "Radu {marker} carved a chess set from walnut.")
    deleted = http.delete(f"{API}/{bank_id}")
    assert deleted.status_code == 200, deleted.text
    held.release()
    wait_for_the_worker_to_drop(server, operation_id)
    banks = [bank["bank_id"] for bank in http.get(API).json()["banks"]]
    assert bank_id not in banks, "the deleted bank stays deleted"
    assert f"{operation_id} is no longer this worker's" in server.log(), "the retain itself gave up"


def test_an_import_into_a_bank_deleted_while_it_is_queued_does_not_make_the_bank_again(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """An import filed under one bank writes into another. The other's delete removes only its own
    operations, so until session 35 the import, claimed after the delete, made the deleted bank again.
    The delete now fails it, naming the bank; a retry would import into a new bank."""
    Model(llm)
    assert http.post(f"{API}/{bank_id}/memories", json={"items": [{"content": "Ilie mends nets."}]}).status_code == 200
    archive = export_archive(http, bank_id)
    target = f"{bank_id}-target"
    assert http.put(f"{API}/{target}", json={"name": "Nets"}).status_code == 200
    busy = [(f"{bank_id}-busy{k}", *queued_retain_held(http, llm, f"{bank_id}-busy{k}", "Oana {marker} paints."))
            for k in range(2)]  # the server's two worker slots: the import stays queued
    try:
        queued = http.post(f"{API}/{bank_id}/transfer/import", params={"target_bank_id": target, "mode": "merge"},
                           files={"file": ("bank.zip", archive, "application/zip")})
        assert queued.status_code == 202, queued.text
        operation_id = queued.json()["operation_id"]
        assert operation(http, bank_id, operation_id)["status"] == "pending"
        assert http.delete(f"{API}/{target}").status_code == 200
        later = retain_async(http, bank_id, "Ilie sells fish.")  # queued after the import
    finally:
        for _, held, _ in busy:
            held.release()
    for busy_bank, _, busy_operation in busy:
        assert wait_terminal(http, busy_bank, busy_operation)["status"] == "completed"
    assert wait_terminal(http, bank_id, later)["status"] == "completed", "the worker went past the import"
    failed = operation(http, bank_id, operation_id)
    assert failed["status"] == "failed", failed
    assert failed["error_message"] == f"its target bank {target} was deleted before the import wrote to it"
    banks = [bank["bank_id"] for bank in http.get(API).json()["banks"]]
    assert target not in banks, "the deleted bank stays deleted"


def test_a_queued_retain_taken_over_by_another_worker_is_not_written_by_the_first(
    claims_server: tuple[RunningServer, str], http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    server, dsn = claims_server
    held, operation_id = queued_retain_held(http, llm, bank_id, "Ilinca {marker} restored a painted chest.")
    asyncio.run(hand_over(dsn, operation_id))
    held.release()
    wait_for_the_worker_to_drop(server, operation_id)
    documents = http.get(f"{API}/{bank_id}/documents").json()["items"]
    assert documents == [], "only the worker holding the operation writes it"
    assert f"{operation_id} is no longer this worker's" in server.log(), "the retain itself gave up"
    assert http.delete(f"{API}/{bank_id}").status_code == 200  # its operation with it


def test_a_reprocess_waiting_for_a_retain_of_its_document_extracts_the_text_that_retain_wrote(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """Retains of one document take turns in a server (`retain.document_turns`); a reprocess reads the
    document's text once its turn comes, not the text the retain before it replaced."""
    held = HeldAnswer(llm)
    old, new = "Sorin fixed the mill wheel.", f"Sorin {held.marker} painted the mill red."
    assert http.post(f"{API}/{bank_id}/memories", json={"items": [{"content": old, "document_id": "mill"}]}
                     ).status_code == 200
    with ThreadPoolExecutor(1) as threads:
        replacing = threads.submit(http.post, f"{API}/{bank_id}/memories",
                                   json={"items": [{"content": new, "document_id": "mill"}]})
        wait_for_llm_call(llm, held.marker)
        reprocess = http.post(f"{API}/{bank_id}/documents/mill/reprocess")
        assert reprocess.status_code == 200, reprocess.text
        operation_id = reprocess.json()["operation_id"]
        wait_for(lambda: operation(http, bank_id, operation_id)["status"] == "processing", "the claim")
        time.sleep(0.3)  # the worker reads the document's text, and waits for the document's turn
        held.release()
        assert replacing.result(timeout=60).status_code == 200
    done = wait_terminal(http, bank_id, operation_id)
    assert done["status"] == "completed", done
    assert http.get(f"{API}/{bank_id}/documents/mill").json()["original_text"] == new
    assert facts(http, bank_id) == [new], "the reprocess extracted the new text"


def test_a_consolidation_taken_over_by_another_worker_writes_nothing_more(
    claims_server: tuple[RunningServer, str], http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    server, dsn = claims_server
    held = HeldAnswer(llm, consolidation=True)
    assert http.post(f"{API}/{bank_id}/memories", json={"items": [{"content": f"Vlad {held.marker} keeps bees."}]}
                     ).status_code == 200
    wait_for_llm_call(llm, held.marker)  # the retain's extraction, then the consolidation's call
    wait_for(lambda: operations(http, bank_id, "consolidation", "processing"), "the consolidation's claim")
    wait_for(lambda: sum(held.marker in r.user_text for r in list(llm.requests)) == 2, "the consolidation's call")
    operation_id = consolidation_id(http, bank_id)
    asyncio.run(hand_over(dsn, operation_id))
    held.release()
    wait_for_the_worker_to_drop(server, operation_id)
    assert observations(http, bank_id) == [], "only the worker holding the operation consolidates"
    assert f"{operation_id} is no longer this worker's" in server.log(), "the consolidation itself gave up"
    assert http.delete(f"{API}/{bank_id}").status_code == 200


async def test_an_import_taken_over_by_another_worker_while_it_waits_for_the_bank_writes_nothing(
    claims_server: tuple[RunningServer, str], http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    server, dsn = claims_server
    Model(llm)
    assert http.post(f"{API}/{bank_id}/memories", json={"items": [{"content": "Mara sews sails."}]}).status_code == 200
    archive = export_archive(http, bank_id)
    target = f"{bank_id}-copy"
    holder = await begin_write(dsn, target)  # a retain into the target under way: the import waits for it
    try:
        queued = http.post(f"{API}/{bank_id}/transfer/import", params={"target_bank_id": target},
                           files={"file": ("bank.zip", archive, "application/zip")})
        assert queued.status_code == 202, queued.text
        operation_id = queued.json()["operation_id"]
        await eventually(lambda: asyncio.run(sessions_waiting_for_locks(dsn)) == 1)
        await hand_over(dsn, operation_id)
    finally:
        await holder.close()
    wait_for_the_worker_to_drop(server, operation_id)
    banks = [bank["bank_id"] for bank in http.get(API).json()["banks"]]
    assert target not in banks, "the import that lost its operation made nothing"
    assert f"{operation_id} is no longer this worker's" in server.log(), "the import itself gave up"


async def test_a_queued_retain_taken_over_while_it_waits_for_the_bank_is_not_written(
    claims_server: tuple[RunningServer, str], http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """The operation is read in its newest version once the changes lock is taken, not as it was when
    the retain's statement began waiting for the lock."""
    server, dsn = claims_server
    Model(llm)
    assert http.put(f"{API}/{bank_id}", json={"name": "Boats"}).status_code == 200
    holder = await begin_write(dsn, bank_id, alone=True)  # a write under way that goes alone: the retain waits
    try:
        operation_id = await asyncio.to_thread(retain_async, http, bank_id, "Petru tars the boat's hull.")
        await eventually(lambda: asyncio.run(sessions_waiting_for_locks(dsn)) == 1)
        await hand_over(dsn, operation_id)
    finally:
        await holder.close()
    await asyncio.to_thread(wait_for_the_worker_to_drop, server, operation_id)
    assert http.get(f"{API}/{bank_id}/documents").json()["items"] == [], "only the worker holding it writes it"
    assert http.delete(f"{API}/{bank_id}").status_code == 200
