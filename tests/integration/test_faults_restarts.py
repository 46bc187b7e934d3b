"""Fault injection, the infrastructure: PostgreSQL restarts in the middle of a retain (sync and async)
and of a consolidation; a worker is killed mid-operation, or dies between committing a retain and
recording it.

After each: the failure is visible (a 503 with a message, or a failed operation with its reason) or the
operation's lease brings it back to another worker; the server recovers without a restart; a retry
succeeds; every fact is stored once and the bank's stats agree with its memory list."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from engram.store.embedded import EmbeddedPostgres
from tests.conftest import ARTIFACTS, start_server
from tests.support.faults import (
    Model,
    assert_nothing_lost_or_doubled,
    consolidation_id,
    extracted,
    facts,
    one_observation_per_fact,
    operation,
    retain,
    retain_async,
    retry,
    settle,
    wait_for,
    wait_for_llm_call,
    wait_terminal,
)
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM

# --- PostgreSQL restarts -------------------------------------------------------------------------------------


class Restartable:
    """A PostgreSQL of our own (not the session's) and a server on it, so the test can restart it."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="engram-restart-"))
        self.pg = EmbeddedPostgres(self.home)
        self.dsn = self.pg.start()
        env = {**llm.settings_env(), "ENGRAM_LLM_TIMEOUT": "30", "ENGRAM_LLM_MAX_RETRIES": "0",
               "ENGRAM_OPERATION_LEASE_SECONDS": "3"}
        self.server = start_server(self.dsn, env, name="pg-restart")

    def stop_postgres(self) -> None:
        self.pg.stop()
        assert self.pg.server is None

    def start_postgres(self) -> None:
        assert self.pg.start() == self.dsn, "the same socket and database after a restart"

    def restart_postgres(self, down_for: float) -> None:
        """Stop PostgreSQL for `down_for` seconds (a held LLM answer arrives meanwhile), start it again
        and wait until the server is healthy."""
        self.stop_postgres()
        time.sleep(down_for)
        self.start_postgres()
        wait_for(self.healthy, "health after the restart", 60)

    def healthy(self) -> bool:
        try:
            return httpx.get(self.server.url + "/health", timeout=5).json()["status"] == "healthy"
        except (httpx.HTTPError, ValueError):
            return False

    def close(self) -> None:
        self.server.stop()
        if self.pg.server is None:
            self.pg.start()  # stop() only stops a server this object started
        self.pg.stop()
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture(scope="module")
def restartable(scripted_llm: ScriptedLLM) -> Iterator[Restartable]:
    running = Restartable(scripted_llm)
    yield running
    running.close()


@pytest.fixture
def restart_http(restartable: Restartable) -> Iterator[httpx.Client]:
    wait_for(restartable.healthy, "the server to be healthy", 60)
    with restartable.server.client() as client:
        yield client


def hold_while_postgres_restarts(model_fault: str, model: Model, marker: str) -> None:
    """The first call whose prompt has `marker` answers after 3 s (long enough to stop PostgreSQL)."""
    held = threading.Event()

    def slow(request: ChatRequest) -> Reply | None:
        if marker in request.user_text and not held.is_set():
            held.set()
            healthy = extracted(request) if model_fault == "retain" else one_observation_per_fact(request)
            return Reply.delay(3, then=Reply.json(healthy))
        return None

    setattr(model, f"{model_fault}_fault", slow)



def test_postgres_restarting_during_a_sync_retain_fails_it_visibly_and_the_server_recovers(
    restartable: Restartable, restart_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    marker = uuid.uuid4().hex[:8]
    hold_while_postgres_restarts("retain", model, marker)
    text = f"Cosmin {marker} rebuilt the stone bridge at Sibiu."
    answers: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answers.append(retain(restart_http, bank_id, text)))
    request.start()
    wait_for_llm_call(llm, marker)
    restartable.stop_postgres()
    request.join(60)
    try:
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        assert "database is unavailable" in answer.json()["detail"], "the error says what happened"
        assert not restartable.healthy(), "health reports the database down"
    finally:
        restartable.start_postgres()
    wait_for(restartable.healthy, "health after the restart", 60)

    assert retain(restart_http, bank_id, text).status_code == 200, "the pool reconnects on its own"
    assert facts(restart_http, bank_id) == [text], "the failed attempt left nothing"
    settle(restart_http, bank_id)
    assert_nothing_lost_or_doubled(restart_http, bank_id)


def test_postgres_restarting_during_an_async_retain_never_leaves_it_stuck(
    restartable: Restartable, restart_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    marker = uuid.uuid4().hex[:8]
    hold_while_postgres_restarts("retain", model, marker)
    text = f"Oana {marker} mapped the caves under Cluj."
    operation_id = retain_async(restart_http, bank_id, text)
    wait_for_llm_call(llm, marker)
    restartable.restart_postgres(4)  # the held answer arrives while it is down: the write cannot happen

    # The worker could not record the failure while the database was down: the lease brings the
    # operation back, or (had the database returned first) it failed with its reason.
    ended = wait_terminal(restart_http, bank_id, operation_id)
    if ended["status"] == "failed":
        assert "database was unavailable" in ended["error_message"], ended
        retry(restart_http, bank_id, operation_id)
    assert operation(restart_http, bank_id, operation_id)["status"] == "completed"
    assert facts(restart_http, bank_id) == [text], "stored exactly once"
    settle(restart_http, bank_id)
    assert_nothing_lost_or_doubled(restart_http, bank_id)
    assert retain(restart_http, bank_id, f"After the restart {marker} Oana found a second cave.").status_code == 200
    settle(restart_http, bank_id)


def test_postgres_restarting_during_a_consolidation_loses_and_doubles_nothing(
    restartable: Restartable, restart_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    marker = uuid.uuid4().hex[:8]
    hold_while_postgres_restarts("consolidation", model, marker)
    lines = [f"Petra {marker} brews cider every autumn.", f"Petra {marker} sells it in Brno."]
    assert retain(restart_http, bank_id, "\n".join(lines)).status_code == 200
    job = consolidation_id(restart_http, bank_id)
    wait_for_llm_call(llm, marker)
    restartable.restart_postgres(4)

    ended = wait_terminal(restart_http, bank_id, job)
    if ended["status"] == "failed":
        assert "database was unavailable" in ended["error_message"], ended
        retry(restart_http, bank_id, job)
    settle(restart_http, bank_id)
    assert facts(restart_http, bank_id) == sorted(lines)
    stats = assert_nothing_lost_or_doubled(restart_http, bank_id)
    assert stats["pending_consolidation"] == 0 and stats["failed_operations"] == 0


# --- a worker killed mid-operation ---------------------------------------------------------------------


def sql(dsn: str, statement: str, *args: Any) -> str:
    """One statement on a connection of its own (a thread of its own: the test may hold an event loop)."""

    async def run() -> str:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.execute(statement, *args)
        finally:
            await conn.close()

    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(asyncio.run(run())))
    thread.start()
    thread.join(30)
    return done[0]


def test_a_worker_dying_between_its_commit_and_its_report_does_not_store_the_retain_twice(
    isolated_dsn: str, llm: ScriptedLLM, bank_id: str
) -> None:
    """The facts are committed, then the worker dies before marking the operation completed: the
    operation is reclaimed and runs again, and must replace what it wrote rather than add a copy."""
    Model(llm)
    server = start_server(isolated_dsn, {**llm.settings_env(), "ENGRAM_OPERATION_LEASE_SECONDS": "2"},
                          name="commit-then-die")
    try:
        with server.client() as http:
            text = "Irina tuned the church organ in Sighisoara.\nThe organ has 1,200 pipes."
            operation_id = retain_async(http, bank_id, text)
            assert wait_terminal(http, bank_id, operation_id)["status"] == "completed"
            settle(http, bank_id)
            extractions = sum(r.schema_name == "ExtractionOutput" for r in list(llm.requests))
            # What a worker killed right after the commit leaves: `processing`, its lease run out.
            status = sql(isolated_dsn, "UPDATE async_operations SET status = 'processing', completed_at = NULL,"
                         " lease_expires_at = now() - interval '1 second' WHERE id = $1", uuid.UUID(operation_id))
            assert status == "UPDATE 1"
            done = wait_terminal(http, bank_id, operation_id)
            assert done["status"] == "completed", done["error_message"]
            assert facts(http, bank_id) == sorted(text.split("\n")), "stored exactly once"
            model_calls = sum(r.schema_name == "ExtractionOutput" for r in list(llm.requests))
            assert model_calls == extractions, "the unchanged chunk is reused, not extracted again"
            stats = settle(http, bank_id)
            assert stats["total_documents"] == 1
            assert_nothing_lost_or_doubled(http, bank_id)
    finally:
        server.stop()


def start_worker(dsn: str, llm: ScriptedLLM, name: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    env.update({**llm.settings_env(), "ENGRAM_DATABASE_URL": dsn, "ENGRAM_OPERATION_LEASE_SECONDS": "2",
                "ENGRAM_WORKER_POLL_INTERVAL": "0.2", "ENGRAM_LLM_MAX_RETRIES": "0"})
    ARTIFACTS.mkdir(exist_ok=True)
    log = (ARTIFACTS / f"{name}.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "engram.cli", "worker"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def test_an_operation_of_a_killed_worker_is_reclaimed_and_stored_once(
    isolated_dsn: str, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    marker = uuid.uuid4().hex[:8]
    first_call = threading.Event()

    def hang_first(request: ChatRequest) -> Reply | None:
        if marker in request.user_text and not first_call.is_set():
            first_call.set()
            return Reply.delay(30, then=Reply.json(extracted(request)))
        return None

    model.retain_fault = hang_first
    server = start_server(isolated_dsn, {**llm.settings_env(), "ENGRAM_WORKER_ENABLED": "false"}, name="no-worker")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        with server.client() as http:
            text = f"Vlad {marker} carved a wooden fox for the village fair."
            operation_id = retain_async(http, bank_id, text)
            workers.append(start_worker(isolated_dsn, llm, f"worker-doomed-{bank_id}"))
            wait_for_llm_call(llm, marker)
            assert operation(http, bank_id, operation_id)["status"] == "processing"
            time.sleep(3)  # longer than the 2 s lease: a live worker keeps its operation
            assert sum(marker in r.user_text for r in list(llm.requests)) == 1, "nobody took it over"
            assert operation(http, bank_id, operation_id)["status"] == "processing"

            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(10)
            workers.append(start_worker(isolated_dsn, llm, f"worker-heir-{bank_id}"))
            done = wait_terminal(http, bank_id, operation_id)
            assert done["status"] == "completed", done["error_message"]
            assert done["result_metadata"]["facts"] == 1
            assert sum(marker in r.user_text for r in list(llm.requests) if r.schema_name == "ExtractionOutput") == 2
            assert facts(http, bank_id) == [text], "stored exactly once"
            settle(http, bank_id)
            assert_nothing_lost_or_doubled(http, bank_id)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(15)
        server.stop()
