"""The scale-out topology under load: two `engram serve --no-worker` replicas and two `engram worker`
processes on one PostgreSQL of their own, reached over TCP as an external one would be. Client threads
using the official client retain (async and sync) through both replicas and recall through the other
one; one worker is killed with SIGKILL halfway. Then: every acknowledged item is stored exactly once
in its own document, every operation completed once, both workers ran operations, the replicas ran
none, and what the killed worker held when it died was finished by the other after its lease ran out."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from hindsight_client import Hindsight

from tests.conftest import ARTIFACTS, RunningServer, free_port, start_server
from tests.support.database import KeptConnection, kept_connection, query
from tests.support.standalone_postgres import standalone_postgres
from tests.support.waiting import wait_for

LEASE_SECONDS = 3  # how long the killed worker's operations stay claimed before the other takes them
WORKER_LOOPS = 2  # an `engram worker` runs two operations at once (worker/runner.py)
CLIENT_THREADS = 4
ASYNC_PER_THREAD = 12  # async retain requests per client thread, ITEMS_PER_REQUEST items each
ITEMS_PER_REQUEST = 2
SYNC_EVERY = 4  # after every 4th async request: a sync retain, recalled through the other replica
TOTAL_OPERATIONS = CLIENT_THREADS * ASYNC_PER_THREAD
PLACES = ["harbour", "mill", "orchard", "quarry", "station", "bakery", "library", "foundry"]


@dataclass
class Item:
    """One retained item, recognisable among the stored facts by its marker (fixed width, unique)."""

    marker: str
    document_id: str | None

    @property
    def content(self) -> str:
        place = PLACES[sum(map(ord, self.marker)) % len(PLACES)]
        return f"Courier {self.marker} carried a sealed parcel to the {place} on Tuesday."

    def payload(self) -> dict[str, str]:
        return {"content": self.content} | ({"document_id": self.document_id} if self.document_id else {})


@dataclass
class Sent:
    """What the replicas acknowledged: each async operation's items, and the sync items."""

    operations: dict[str, list[Item]] = field(default_factory=dict)
    sync_items: list[Item] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def items(self) -> list[Item]:
        return [item for items in self.operations.values() for item in items] + self.sync_items


@dataclass
class WorkerProcess:
    name: str  # its connections' application_name
    process: subprocess.Popen[bytes]
    log_path: Path
    worker_id: str = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def claims(self) -> set[str]:
        return set(re.findall(rf"worker {re.escape(self.worker_id)}/\d+ claimed operation (\S+)", self.log()))

    def completions(self) -> list[str]:
        return re.findall(rf"worker {re.escape(self.worker_id)}/\d+ completed operation (\S+)", self.log())

    def ran(self, row: asyncpg.Record) -> bool:
        """Whether one of this worker's slots (`holder`s: its id, a slash, the slot) holds or finished `row`."""
        return (row["worker_id"] or "").rpartition("/")[0] == self.worker_id


def start_worker(dsn: str, name: str) -> WorkerProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    env.update({"ENGRAM_DATABASE_URL": f"{dsn}?application_name={name}",
                "ENGRAM_OPERATION_LEASE_SECONDS": str(LEASE_SECONDS),
                "ENGRAM_WORKER_POLL_INTERVAL": "0.2", "ENGRAM_LOG_LEVEL": "INFO"})
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"{name}-{uuid.uuid4().hex[:6]}.log"
    process = subprocess.Popen([sys.executable, "-m", "engram.cli", "worker", "--concurrency", "2"], env=env,
                               stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    return WorkerProcess(name, process, log_path)


def wait_until_running(worker: WorkerProcess) -> None:
    def running() -> str | None:
        assert worker.process.poll() is None, f"the worker exited:\n{worker.log()}"
        found = re.search(r"engram worker (\S+) running", worker.log())
        return found.group(1) if found else None

    worker.worker_id = wait_for(running, "a worker to start", timeout=60)


def client_thread(thread: int, urls: list[str], bank_id: str, sent: Sent) -> None:
    """Async retains round-robin to the replicas; now and then a sync retain through one replica and a
    recall of it through the other (what one replica stored, the other serves at once)."""
    clients = [Hindsight(base_url=url, timeout=60) for url in urls]
    try:
        for i in range(ASYNC_PER_THREAD):
            n = thread * ASYNC_PER_THREAD + i
            here = n % 2
            # Half the items name their document, half leave it to the server.
            items = [Item(f"QX{n:03d}{k}", f"parcel-{n}-{k}" if (n + k) % 2 else None)
                     for k in range(ITEMS_PER_REQUEST)]
            response = clients[here].retain_batch(bank_id, [item.payload() for item in items], retain_async=True)
            assert response.var_async is True and response.operation_id
            with sent.lock:
                sent.operations[response.operation_id] = items
            if i % SYNC_EVERY == SYNC_EVERY - 1:
                turn = (n // SYNC_EVERY) % 2  # through each replica in turn, with and without a document id
                item = Item(f"SY{n:03d}0", f"sync-{n}" if turn else None)
                clients[turn].retain(bank_id, item.content, document_id=item.document_id)
                with sent.lock:
                    sent.sync_items.append(item)
                found = clients[1 - turn].recall(bank_id, item.content, budget="low")
                assert any(item.marker in result.text for result in found.results), (
                    f"{item.marker}, retained through one replica, is not recalled through the other")
    finally:
        for client in clients:
            client.close()


def operations_ended(dsn: str, bank_id: str) -> int:
    """How many of the bank's operations have completed or failed."""
    return query(dsn, "SELECT count(*) AS n FROM async_operations WHERE bank_id = $1 "
                      "AND status IN ('completed', 'failed')", bank_id)[0]["n"]


# The operations a worker holds, each with whether its facts are already stored (a retain committed,
# its completion not yet): every QX marker of its payload is in a fact of its bank.
HELD = r"""
    SELECT o.id::text AS id,
           count(r.marker) > 0 AND coalesce(bool_and(EXISTS (
               SELECT 1 FROM memory_units m WHERE m.bank_id = o.bank_id AND m.text LIKE '%' || r.marker || '%')), false)
           AS stored
    FROM async_operations o
    LEFT JOIN LATERAL (
        SELECT match[1] AS marker FROM regexp_matches(o.payload::text, 'QX\d{4}', 'g') AS match
    ) r ON true
    WHERE starts_with(o.worker_id, $1 || '/') AND o.status = 'processing'
    GROUP BY o.id
"""


def held_operations(fetch: Callable[..., list[asyncpg.Record]], worker: WorkerProcess) -> dict[str, bool]:
    """`HELD` for the worker, through `fetch` (a kept connection's, or `query` bound to a dsn)."""
    return {row["id"]: row["stored"] for row in fetch(HELD, worker.worker_id)}


# The frozen worker's sessions still running a statement it sent (a COMMIT that may end its hold).
RUNNING_STATEMENTS = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'"
SETTLE_SECONDS = 0.1


def settled_holding(connection: KeptConnection, worker: WorkerProcess, held: dict[str, bool]) -> bool:
    """Whether the frozen worker still holds `held` once what it sent before it froze has run.

    A COMMIT it wrote just before SIGSTOP may still be in its socket or running (the operation
    completed, its hold gone: CI saw the killed worker hold nothing). After a pause, no session of
    the worker runs a statement and it holds the same operations: nothing it sent can change that."""
    time.sleep(SETTLE_SECONDS)
    return (connection.fetch(RUNNING_STATEMENTS, worker.name)[0]["count"] == 0
            and held_operations(connection.fetch, worker) == held)


def kill_while_holding(worker: WorkerProcess, dsn: str, wait_for_stored: float = 3) -> dict[str, bool]:
    """SIGKILL the worker while it holds operations; return those it held (as `held_operations`).

    It is frozen (SIGSTOP) while its claims are read, so that it is killed holding something; for up
    to `wait_for_stored` seconds only while holding one whose facts are stored, the hardest case (its
    re-run must not store them again). What it held is read again once PostgreSQL has closed its
    sessions: a commit it had sent before it froze may still have gone through."""
    pid, start = worker.process.pid, time.monotonic()
    # One kept connection: a look is one query of about a millisecond, so the worker frozen for it is
    # hardly slowed (with a new connection for each look it was frozen most of the time on a busy
    # machine, and the other worker took the rest of the load).
    with kept_connection(dsn) as connection:
        while True:
            os.kill(pid, signal.SIGSTOP)
            held = held_operations(connection.fetch, worker)
            if (any(held.values()) or (held and time.monotonic() > start + wait_for_stored)) \
                    and settled_holding(connection, worker, held):
                break
            os.kill(pid, signal.SIGCONT)
            assert time.monotonic() < start + 30, "the worker never held an operation while the load ran"
            time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    worker.process.wait(timeout=30)
    wait_for(lambda: not query(dsn, "SELECT 1 FROM pg_stat_activity WHERE application_name = $1", worker.name),
             "the killed worker's database sessions to end")
    held = held_operations(functools.partial(query, dsn), worker)
    assert held, "the killed worker held an operation"
    return held


def check_stored_exactly_once(dsn: str, bank_id: str, sent: Sent) -> None:
    facts = query(dsn, "SELECT text, document_id FROM memory_units WHERE bank_id = $1", bank_id)
    items = sent.items()
    found = {item.marker: [fact for fact in facts if item.marker in fact["text"]] for item in items}
    lost = sorted(marker for marker, matches in found.items() if not matches)
    duplicated = sorted(marker for marker, matches in found.items() if len(matches) > 1)
    assert not lost and not duplicated, (
        f"{len(lost)} items lost {lost[:5]}, {len(duplicated)} duplicated {duplicated[:5]}")
    assert len(facts) == len(items), "no fact other than the retained items'"
    for item in items:  # in the document it named, or in one the server named
        document_id = found[item.marker][0]["document_id"]
        assert document_id == item.document_id if item.document_id else document_id is not None
    documents = {row["id"] for row in query(dsn, "SELECT id FROM documents WHERE bank_id = $1", bank_id)}
    assert documents == {matches[0]["document_id"] for matches in found.values()}
    assert len(documents) == len(items), "each item in a document of its own"


def operation_rows(dsn: str, bank_id: str) -> dict[str, asyncpg.Record]:
    return {str(row["id"]): row for row in query(
        dsn, "SELECT id, status, error_message, worker_id, result FROM async_operations WHERE bank_id = $1",
        bank_id)}


def check_completed_once(rows: dict[str, asyncpg.Record], sent: Sent, workers: list[WorkerProcess],
                         held: set[str]) -> None:
    victim, _ = workers
    assert set(rows) == set(sent.operations), "exactly the acknowledged operations, nothing lost or added"
    failed = {op_id: row["error_message"] for op_id, row in rows.items() if row["status"] != "completed"}
    assert not failed, f"{len(failed)} operations did not complete: {failed}"
    # No operation ran to its end in two workers (or twice in one): each worker logs a completion
    # once it is committed, and only the kill can come in between.
    completions = Counter(op_id for worker in workers for op_id in worker.completions())
    assert max(completions.values()) == 1, f"completed twice: {[k for k, v in completions.items() if v > 1]}"
    unlogged = set(rows) - set(completions)
    assert len(unlogged) <= 2 and all(victim.ran(rows[op_id]) for op_id in unlogged)
    for worker in workers:
        assert all(worker.ran(rows[op_id]) for op_id in worker.completions())
    for op_id, items in sent.operations.items():
        # Run once, an operation reports its items' facts. One the victim held may have been killed
        # after storing them: the re-run then finds its documents unchanged and reports no new fact.
        facts = json.loads(rows[op_id]["result"])["facts"]
        assert facts == len(items) or (op_id in held and facts == 0), f"operation {op_id} reported {facts} facts"


def check_who_ran_what(rows: dict[str, asyncpg.Record], workers: list[WorkerProcess], held: set[str],
                       replicas: list[RunningServer]) -> None:
    """The row names the worker that finished it; each worker logs what it claims."""
    victim, survivor = workers
    ran = Counter(worker.name for row in rows.values() for worker in workers if worker.ran(row))
    outside = [row["worker_id"] for row in rows.values() if not any(worker.ran(row) for worker in workers)]
    assert not outside, f"operations run outside the two workers: {outside}"
    assert ran[victim.name] > 0 and ran[survivor.name] > 0, f"both workers ran operations: {ran}"
    for replica in replicas:
        assert "claimed operation" not in replica.log() and "no operations worker in this process" in replica.log()
    # The killed worker logged its claims, but one whose claim had committed when SIGSTOP froze it may
    # not be logged yet (the log line follows the commit): at most one per worker loop.
    assert len(held - victim.claims()) <= WORKER_LOOPS and not held & set(victim.completions())
    finished_by_victim = {op_id for op_id, row in rows.items() if victim.ran(row)}
    assert finished_by_victim <= victim.claims(), "every operation the killed worker finished, it logged claiming"
    taken_over = {op_id: rows[op_id]["worker_id"] for op_id in held}
    assert held <= survivor.claims() and all(survivor.ran(rows[op_id]) for op_id in held), (
        f"what the killed worker held was finished by the survivor: {taken_over}")


def test_replicas_and_workers_on_one_postgres_lose_and_duplicate_nothing(bank_id: str) -> None:
    with standalone_postgres(free_port()) as dsn:
        workers = [start_worker(dsn, f"topology-worker-{k}") for k in range(2)]
        replicas: list[RunningServer] = []
        try:
            replicas = [start_server(dsn, name=f"topology-replica-{k}", args=("--no-worker",)) for k in range(2)]
            for worker in workers:
                wait_until_running(worker)
            sent = Sent()
            urls = [replica.url for replica in replicas]
            with ThreadPoolExecutor(CLIENT_THREADS) as pool:
                loads = [pool.submit(client_thread, t, urls, bank_id, sent) for t in range(CLIENT_THREADS)]
                wait_for(lambda: operations_ended(dsn, bank_id) >= TOTAL_OPERATIONS // 4,
                         "a quarter of the async retains to complete", timeout=60)
                held = set(kill_while_holding(workers[0], dsn))
                for load in loads:
                    load.result()
            assert len(sent.operations) == TOTAL_OPERATIONS
            wait_for(lambda: operations_ended(dsn, bank_id) == TOTAL_OPERATIONS,
                     "every operation to end", timeout=60)
            check_stored_exactly_once(dsn, bank_id, sent)
            rows = operation_rows(dsn, bank_id)
            check_completed_once(rows, sent, workers, held)
            check_who_ran_what(rows, workers, held, replicas)
        finally:
            for replica in replicas:
                replica.stop()
            for worker in workers:
                if worker.process.poll() is None:
                    worker.process.send_signal(signal.SIGCONT)
                    worker.process.terminate()
                    worker.process.wait(timeout=30)
