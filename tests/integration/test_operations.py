"""Background operations over HTTP: an async retain is a queued operation that reports progress and
ends completed or failed with the reason; failed and cancelled ones can be retried, terminal ones
deleted, and a client-chosen operation id makes a resubmitted request idempotent.

Listings are filtered to `type=retain`: follow-up work a retain may enqueue is not what is tested here."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from engram.worker.runner import SLOTS_WITH_LLM
from tests.conftest import RunningServer
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM

TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture
def llm_http(llm_server: RunningServer) -> Iterator[httpx.Client]:
    with llm_server.client() as client:
        yield client


def submit(http: httpx.Client, bank_id: str, *contents: str, **extra: Any) -> str:
    body = {"items": [{"content": c} for c in contents], "async": True, **extra}
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["async"] is True
    assert answer["items_count"] == len(contents)
    assert answer["operation_id"]
    assert answer["operation_ids"] in (None, [answer["operation_id"]])
    return answer["operation_id"]


def get_operation(http: httpx.Client, bank_id: str, operation_id: str) -> dict[str, Any]:
    response = http.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_until(
    http: httpx.Client, bank_id: str, operation_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        operation = get_operation(http, bank_id, operation_id)
        if done(operation):
            return operation
        assert time.monotonic() < deadline, f"gave up waiting; last seen: {operation}"
        time.sleep(0.05)


def wait_terminal(http: httpx.Client, bank_id: str, operation_id: str) -> dict[str, Any]:
    return wait_until(http, bank_id, operation_id, lambda op: op["status"] in TERMINAL)


def memory_texts(http: httpx.Client, bank_id: str) -> list[str]:
    response = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return sorted(m["text"] for m in response.json()["items"])


def list_operations(http: httpx.Client, bank_id: str, **params: Any) -> dict[str, Any]:
    response = http.get(f"/v1/default/banks/{bank_id}/operations", params={"type": "retain", **params})
    assert response.status_code == 200, response.text
    return response.json()


def extraction(request: ChatRequest) -> dict[str, Any]:
    """A valid extraction answer: one world fact per line of the chunk's text."""
    text = request.user_text.split("Text:\n", 1)[-1]
    return {"facts": [{"what": line.strip(), "fact_type": "world"} for line in text.splitlines() if line.strip()]}


# --- the operation lifecycle, offline -------------------------------------------------------------


def test_async_retain_is_an_operation_that_completes(http: httpx.Client, bank_id: str) -> None:
    operation_id = submit(
        http, bank_id, "The lighthouse keeper logs the weather at dawn.", "The ferry to Skye leaves at nine."
    )
    operation = wait_terminal(http, bank_id, operation_id)
    assert operation["status"] == "completed", operation["error_message"]
    assert operation["operation_id"] == operation_id
    assert operation["operation_type"] == "retain"
    assert operation["items_count"] == 2
    assert operation["error_message"] is None
    assert operation["created_at"] and operation["completed_at"]
    assert operation["completed_at"] >= operation["created_at"]
    progress = operation["progress"]
    assert progress is not None and progress["stage"] and progress["at"], "the last progress report is kept"

    texts = memory_texts(http, bank_id)
    assert any("lighthouse keeper" in t for t in texts)
    assert any("ferry to Skye" in t for t in texts)
    assert operation["result_metadata"]["facts"] == len(texts)


def test_each_new_operation_is_announced_on_the_operations_channel(http: httpx.Client, bank_id: str,
                                                                   pg_dsn: str) -> None:
    """Whatever LISTENs on `engram_operations` (a worker of one's own, woken without polling) hears the
    id of every operation queued, once it is committed; the same statement that queues it says so."""
    heard: list[str] = []
    listening, done = threading.Event(), threading.Event()

    async def listen() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.add_listener("engram_operations", lambda *args: heard.append(args[3]))
            listening.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
        finally:
            await conn.close()

    thread = threading.Thread(target=lambda: asyncio.run(listen()))
    thread.start()
    try:
        assert listening.wait(30)
        operation_id = submit(http, bank_id, "The night heron fishes the weir at dusk.")
        deadline = time.monotonic() + 10
        while operation_id not in heard and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        done.set()
        thread.join(30)
    assert operation_id in heard


def test_operations_are_listed_and_filtered_by_status(http: httpx.Client, bank_id: str) -> None:
    first = submit(http, bank_id, "Mira repaired the old clock tower.")
    second = submit(http, bank_id, "Jonas painted the garden fence green.")
    for operation_id in (first, second):
        assert wait_terminal(http, bank_id, operation_id)["status"] == "completed"

    everything = list_operations(http, bank_id)
    assert everything["bank_id"] == bank_id
    assert everything["total"] == 2
    assert [op["id"] for op in everything["operations"]] == [second, first], "newest first"
    listed = everything["operations"][0]
    assert (listed["task_type"], listed["status"], listed["items_count"]) == ("retain", "completed", 1)

    assert {op["id"] for op in list_operations(http, bank_id, status="completed")["operations"]} == {first, second}
    assert list_operations(http, bank_id, status="pending") == {
        "bank_id": bank_id, "total": 0, "limit": 20, "offset": 0, "operations": []}
    assert list_operations(http, bank_id, status="failed")["total"] == 0
    page = list_operations(http, bank_id, limit=1, offset=1)
    assert [op["id"] for op in page["operations"]] == [first]
    assert page["total"] == 2

    assert http.get("/v1/default/banks/no-such-bank-ops/operations").status_code == 404


def test_a_finished_operation_cannot_be_cancelled_but_can_be_deleted(http: httpx.Client, bank_id: str) -> None:
    operation_id = submit(http, bank_id, "The bakery on Rue Cler opens at seven.")
    assert wait_terminal(http, bank_id, operation_id)["status"] == "completed"

    cancel = http.delete(f"/v1/default/banks/{bank_id}/operations/{operation_id}")
    assert cancel.status_code == 409, cancel.text
    assert "pending" in cancel.json()["detail"]
    retry = http.post(f"/v1/default/banks/{bank_id}/operations/{operation_id}/retry")
    assert retry.status_code == 409, "only failed or cancelled operations are retried"

    deleted = http.delete(f"/v1/default/banks/{bank_id}/operations/{operation_id}/delete")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["success"] is True
    assert list_operations(http, bank_id)["total"] == 0
    assert http.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json()["status"] == "not_found"
    assert any("bakery" in t for t in memory_texts(http, bank_id)), "deleting the record keeps the memories"


def test_unknown_operations_are_not_found(http: httpx.Client, bank_id: str) -> None:
    submit(http, bank_id, "A bank must exist for this test.")
    unknown = str(uuid.uuid4())
    base = f"/v1/default/banks/{bank_id}/operations"
    assert http.get(f"{base}/{unknown}").json() == {"operation_id": unknown, "status": "not_found"}
    assert http.delete(f"{base}/{unknown}").status_code == 404
    assert http.post(f"{base}/{unknown}/retry").status_code == 404
    assert http.delete(f"{base}/{unknown}/delete").status_code == 404
    assert http.get(f"{base}/not-a-uuid").json()["status"] == "not_found"


def test_client_supplied_operation_id_makes_a_resubmission_idempotent(http: httpx.Client, bank_id: str) -> None:
    operation_id = str(uuid.uuid4())
    content = "The night train to Vienna departs from platform four."
    assert submit(http, bank_id, content, operation_id=operation_id) == operation_id
    assert submit(http, bank_id, content, operation_id=operation_id) == operation_id
    assert wait_terminal(http, bank_id, operation_id)["status"] == "completed"
    assert submit(http, bank_id, content, operation_id=operation_id) == operation_id, "after completion too"
    time.sleep(0.5)  # room for a wrongly re-queued copy to run

    assert list_operations(http, bank_id)["total"] == 1
    texts = memory_texts(http, bank_id)
    assert len(texts) == 1 and "night train to Vienna" in texts[0]

    bad = http.post(f"/v1/default/banks/{bank_id}/memories",
                    json={"items": [{"content": content}], "async": True, "operation_id": "not-a-uuid"})
    assert bad.status_code in (400, 422), bad.text


# --- with a scripted LLM: progress, failure, retry, cancel ---------------------------------------------


def test_progress_is_reported_while_the_operation_runs(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    release = threading.Event()

    def answer(request: ChatRequest) -> dict[str, Any]:
        if "HOLD" in request.user_text:
            release.wait(10)
        return extraction(request)

    llm.handler = answer
    operation_id = submit(llm_http, bank_id, "Ana grows basil on her balcony.", "HOLD Ben keeps bees in the yard.")
    try:
        running = wait_until(
            llm_http, bank_id, operation_id,
            lambda op: op["status"] == "processing" and (op["progress"] or {}).get("processed") == 1,
        )
    finally:
        release.set()
    progress = running["progress"]
    assert (progress["stage"], progress["processed"], progress["total"]) == ("extracting", 1, 2)
    assert progress["at"]

    done = wait_terminal(llm_http, bank_id, operation_id)
    assert done["status"] == "completed", done["error_message"]
    assert done["progress"]["at"] >= progress["at"]
    assert memory_texts(llm_http, bank_id) == ["Ana grows basil on her balcony.", "HOLD Ben keeps bees in the yard."]


def test_a_failed_llm_call_fails_the_operation_and_a_retry_completes_it(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = lambda request: Reply.error(500, "upstream model crashed")
    operation_id = submit(llm_http, bank_id, "Chloe adopted a grey cat named Pixel.\nPixel sleeps on the piano.")

    failed = wait_terminal(llm_http, bank_id, operation_id)
    assert failed["status"] == "failed"
    assert "openai" in failed["error_message"] and "500" in failed["error_message"], failed["error_message"]
    assert memory_texts(llm_http, bank_id) == [], "a failed extraction writes nothing"
    assert [op["id"] for op in list_operations(llm_http, bank_id, status="failed")["operations"]] == [operation_id]
    assert list_operations(llm_http, bank_id, status="completed")["total"] == 0

    llm.handler = extraction
    retry = llm_http.post(f"/v1/default/banks/{bank_id}/operations/{operation_id}/retry")
    assert retry.status_code == 200, retry.text
    assert retry.json()["operation_id"] == operation_id

    done = wait_terminal(llm_http, bank_id, operation_id)
    assert done["status"] == "completed", done["error_message"]
    assert done["error_message"] is None
    assert done["retry_count"] == 1
    assert memory_texts(llm_http, bank_id) == ["Chloe adopted a grey cat named Pixel.", "Pixel sleeps on the piano."]
    assert list_operations(llm_http, bank_id, status="failed")["total"] == 0


def test_a_pending_operation_can_be_cancelled_and_retried(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """Busy every worker slot with operations whose LLM answer is held, so the next one stays pending."""
    release = threading.Event()
    marker = uuid.uuid4().hex[:8]

    def answer(request: ChatRequest) -> dict[str, Any]:
        if marker in request.user_text:
            release.wait(10)
        return extraction(request)

    def held_requests() -> int:
        return sum(marker in r.user_text for r in list(llm.requests))

    llm.handler = answer
    blockers: list[str] = []
    pending: str | None = None
    try:
        for n in range(SLOTS_WITH_LLM + 2):
            operation_id = submit(llm_http, bank_id, f"Blocker {n} {marker} waits for the model.")
            deadline = time.monotonic() + 1.0
            while held_requests() < len(blockers) + 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            if held_requests() == len(blockers) + 1:
                blockers.append(operation_id)
                continue
            pending = operation_id
            break
        assert pending is not None, "the worker never ran out of free slots"
        assert get_operation(llm_http, bank_id, pending)["status"] == "pending"

        cancel = llm_http.delete(f"/v1/default/banks/{bank_id}/operations/{pending}")
        assert cancel.status_code == 200, cancel.text
        assert cancel.json()["operation_id"] == pending
        if blockers:
            busy = llm_http.delete(f"/v1/default/banks/{bank_id}/operations/{blockers[0]}")
            assert busy.status_code == 409, "an operation being processed runs to its end"
            in_flight = llm_http.delete(f"/v1/default/banks/{bank_id}/operations/{blockers[0]}/delete")
            assert in_flight.status_code in (404, 409), "a running operation cannot be deleted"
            assert get_operation(llm_http, bank_id, blockers[0])["status"] == "processing"
    finally:
        release.set()

    for operation_id in blockers:
        assert wait_terminal(llm_http, bank_id, operation_id)["status"] == "completed"
    assert get_operation(llm_http, bank_id, pending)["status"] == "cancelled"
    assert {op["id"] for op in list_operations(llm_http, bank_id, status="cancelled")["operations"]} == {pending}
    texts = memory_texts(llm_http, bank_id)
    assert len(texts) == len(blockers), "the cancelled operation wrote nothing"

    retry = llm_http.post(f"/v1/default/banks/{bank_id}/operations/{pending}/retry")
    assert retry.status_code == 200, retry.text
    assert wait_terminal(llm_http, bank_id, pending)["status"] == "completed"
    assert len(memory_texts(llm_http, bank_id)) == len(blockers) + 1
