"""LLM calls in flight at once (`llm.call_slots`): a retain extracts as many chunks at once as half of
the process's slots (`ENGRAM_LLM_MAX_CONCURRENT`), and the process never has more calls in flight than
its slots, however many retains run; queued work holds at most half of them; the worker runs
`ENGRAM_WORKER_MAX_SLOTS` queued retains at once.
The scripted LLM only holds each extraction call a while and counts how many it holds at once; the
bounds are the engine's."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import RunningServer, scripted_server
from tests.support.faults import API, Model, facts, retain_async, wait_terminal
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM
from tests.support.waiting import wait_for

SLOTS = 10  # the process's; a retain, and the queued work in all, take 5
WORKER_SLOTS = 3


@pytest.fixture(scope="module")
def bounded_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    with scripted_server(pg_dsn, scripted_llm, "llm-slots", ENGRAM_LLM_MAX_CONCURRENT=str(SLOTS),
                         ENGRAM_WORKER_MAX_SLOTS=str(WORKER_SLOTS)) as (running, _):
        yield running


class InFlight:
    """Holds each extraction call `seconds`, counting the calls held at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = self.now = self.peak = 0
        self.gate: threading.Event | None = None  # set: calls are held until it opens, not `seconds`
        self._lock = threading.Lock()

    def hold(self, request: ChatRequest) -> None:
        with self._lock:
            self.calls += 1
            self.now += 1
            self.peak = max(self.peak, self.now)
        if self.gate is not None:
            self.gate.wait(20)
        else:
            time.sleep(self.seconds)
        with self._lock:
            self.now -= 1


@pytest.fixture
def in_flight(llm: ScriptedLLM) -> InFlight:
    """The scripted LLM's extraction calls, each held 0.25 s and counted."""
    held = InFlight(0.25)
    Model(llm).retain_fault = held.hold
    return held


def retain_separate_documents(server: RunningServer, bank_id: str, count: int) -> int:
    """One sync retain of `count` items, each a document (a chunk) of its own; its status."""
    with server.client() as http:
        items = [{"content": f"Ana mended net number {k} at dawn."} for k in range(count)]
        return http.post(f"{API}/{bank_id}/memories", json={"items": items}, timeout=60).status_code


def test_a_retain_extracts_half_the_process_slots_of_chunks_at_once(
    bounded_server: RunningServer, in_flight: InFlight, bank_id: str
) -> None:
    assert retain_separate_documents(bounded_server, bank_id, 12) == 200
    assert in_flight.calls == 12
    assert in_flight.peak == SLOTS // 2, f"{in_flight.peak} extraction calls at once"


def test_retains_at_once_never_have_more_calls_in_flight_than_the_process_slots(
    bounded_server: RunningServer, in_flight: InFlight, bank_id: str
) -> None:
    banks = [f"{bank_id}-{k}" for k in range(3)]
    with ThreadPoolExecutor(len(banks)) as threads:
        statuses = list(threads.map(lambda bank: retain_separate_documents(bounded_server, bank, 12), banks))
    assert statuses == [200] * len(banks)
    assert in_flight.peak == SLOTS, f"{in_flight.peak} calls at once, for {SLOTS} slots"
    with bounded_server.client() as http:
        metrics = http.get("/metrics").text
    waits = {name: float(value) for name, value in re.findall(r"^(engram_llm_slot_wait\w*) (\S+)$", metrics, re.M)}
    assert waits.get("engram_llm_slot_waits_total", 0) >= 1, "the calls that waited for a slot are counted"
    assert waits.get("engram_llm_slot_wait_seconds_total", 0) >= 0.2, "and their wait (a held call's 0.25 s at least)"
    with bounded_server.client() as http:
        assert [len(facts(http, bank)) for bank in banks] == [12] * len(banks), "every item stored"


def dry_run_separate_chunks(server: RunningServer, bank_id: str, count: int) -> int:
    """A dry run of `count` lines, a chunk each; its status."""
    lines = [f"Ana mended net number {k} at dawn before the boats left." for k in range(count)]
    with server.client() as http:
        return http.post(f"{API}/{bank_id}/memories/dry-run-extract",
                         json={"content": "\n\n".join(lines), "retain_chunk_size": 60}).status_code


@pytest.mark.parametrize("extract", [retain_separate_documents, dry_run_separate_chunks], ids=["retain", "dry-run"])
def test_a_retain_whose_chunk_fails_extracts_no_more_of_its_chunks(
    bounded_server: RunningServer, llm: ScriptedLLM, bank_id: str, extract: Callable[[RunningServer, str, int], int]
) -> None:
    """The first chunk's call fails at once: the retain (or dry run) fails, and the calls it had in
    flight are cancelled and no other chunk is sent (until session 36 its eleven other chunks went on
    to the model after it had answered)."""
    held = InFlight(0.5)

    def fault(request: ChatRequest) -> Reply | None:
        if "net number 0 " in request.user_text:
            return Reply.error(500, "the first chunk fails")
        held.hold(request)
        return None

    Model(llm).retain_fault = fault
    with bounded_server.client() as http:
        assert http.put(f"{API}/{bank_id}", json={}).status_code == 200
    status = extract(bounded_server, bank_id, 12)
    assert status == 502, f"{status}: the provider's failure, as it is (not wrapped)"
    time.sleep(1.5)  # past the held calls' answers: any chunk still being extracted would have called by now
    assert held.calls <= SLOTS // 2, f"{held.calls} other chunks sent after the retain failed"
    with bounded_server.client() as http:
        assert facts(http, bank_id) == [], "nothing of the failed retain stored"


def test_the_worker_runs_its_slots_worth_of_queued_retains_at_once(
    bounded_server: RunningServer, in_flight: InFlight, bank_id: str
) -> None:
    """Fewer worker slots than LLM slots: the worker's are the bound. Until session 35 it ran two."""
    with bounded_server.client() as http:
        operations = [retain_async(http, bank_id, f"Ana mended net number {k} at dawn.") for k in range(10)]
        assert [wait_terminal(http, bank_id, op)["status"] for op in operations] == ["completed"] * 10
    assert in_flight.calls == 10
    assert in_flight.peak == WORKER_SLOTS, f"{in_flight.peak} queued retains extracting at once"


def test_a_dry_run_extracts_its_chunks_as_a_retain_does(
    bounded_server: RunningServer, in_flight: InFlight, bank_id: str
) -> None:
    lines = [f"Ana mended net number {k} at dawn before the boats left." for k in range(6)]
    with bounded_server.client() as http:
        assert http.put(f"{API}/{bank_id}", json={}).status_code == 200
        response = http.post(f"{API}/{bank_id}/memories/dry-run-extract",
                             json={"content": "\n\n".join(lines), "retain_chunk_size": 60})
    assert response.status_code == 200, response.text
    assert [chunk["fact_count"] for chunk in response.json()["chunks"]] == [1] * 6, "a chunk a line, in order"
    assert [fact["text"] for fact in response.json()["facts"]] == lines
    assert response.json()["usage"]["total_tokens"] == 6 * 15, "every chunk's tokens (10 + 5 a call)"
    assert in_flight.peak == SLOTS // 2, f"{in_flight.peak} chunks at once"


def test_queued_work_holds_half_the_slots_so_a_requests_call_never_waits_behind_it(
    bounded_server: RunningServer, in_flight: InFlight, bank_id: str
) -> None:
    """Three queued retains of six items would send fifteen calls at once (five each); they get five,
    and a sync retain's call sent meanwhile gets a slot at once."""
    in_flight.gate = threading.Event()
    items = [{"content": f"Ana mended net number {k} at dawn."} for k in range(6)]
    with bounded_server.client() as http, ThreadPoolExecutor(1) as thread:
        try:
            operations = [http.post(f"{API}/{bank_id}/memories", json={"items": items, "async": True}
                                    ).json()["operation_id"] for _ in range(WORKER_SLOTS)]
            wait_for(lambda: in_flight.now >= SLOTS // 2, "the queued retains' calls")
            time.sleep(0.3)
            assert in_flight.now == SLOTS // 2, f"queued work holds {in_flight.now} slots, not half of {SLOTS}"
            sync = thread.submit(http.post, f"{API}/{bank_id}-request/memories",
                                 json={"items": [{"content": "Bea caulks the hull."}]})
            wait_for(lambda: in_flight.now == SLOTS // 2 + 1, "the request's call", timeout=5)
        finally:
            in_flight.gate.set()
        assert sync.result(timeout=30).status_code == 200
        assert [wait_terminal(http, bank_id, op)["status"] for op in operations] == ["completed"] * WORKER_SLOTS
        assert len(facts(http, bank_id)) == 6 * WORKER_SLOTS
