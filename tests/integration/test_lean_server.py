"""What a running server holds while it waits: how many PostgreSQL connections (each one a PostgreSQL
process of its own, ~19 MB resident), which libraries it has loaded, and which of its objects the
garbage collector still scans."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, start_server
from tests.support.database import query
from tests.support.faults import retain


@pytest.fixture
def own_server(isolated_dsn: str) -> Iterator[RunningServer]:
    running = start_server(isolated_dsn, name="lean")
    yield running
    running.stop()


def server_sessions(dsn: str) -> list[str]:
    """The database's client sessions but this one's, each as when it started and what it ran last (for
    a failure's message). Autovacuum's workers are left out: after a few retains one may be analysing
    the new rows (CI once counted it as the server's third connection)."""
    rows = query(dsn, "SELECT backend_start, state, left(query, 100) AS last FROM pg_stat_activity"
                      " WHERE datname = current_database() AND backend_type = 'client backend'"
                      " AND pid <> pg_backend_pid() ORDER BY backend_start")
    return [f"{row['backend_start']:%H:%M:%S.%f} {row['state']}: {row['last']!r}" for row in rows]


def server_connections(dsn: str) -> int:
    return len(server_sessions(dsn))


def test_the_worker_and_webhook_polls_share_one_connection(own_server: RunningServer, isolated_dsn: str,
                                                           bank_id: str) -> None:
    """Two operation slots and the webhook sender poll every 0.2 s here, on the same beat. Each used
    to take a connection of its own at every tick, so the pool kept four open; taking turns, they
    need one beside the pool's second. (A recall uses two of its own, its keyword arm beside the
    semantic one, so a poll during a recall may still open a third: not tested here. So may the first
    retain into a bank: it checks the planner's statistics of the bank in the background, at most once
    every 30 s, and the check can meet the next retain and a poll; it runs on its own first here.)"""
    time.sleep(2.0)  # ten polls of each
    assert server_connections(isolated_dsn) <= 2, "an idle server keeps only the pool's two connections"
    with own_server.client() as http:
        assert retain(http, bank_id, "Juno saw the first heron on the lake.").status_code == 200
        time.sleep(1.0)  # the bank's statistics checked
        for n in range(12):
            assert retain(http, bank_id, f"Juno counted {n} herons on the lake.").status_code == 200
    time.sleep(1.0)
    assert server_connections(isolated_dsn) <= 2, (
        f"one client's sync retains beside the polls need no third: {server_sessions(isolated_dsn)}")


def test_a_server_loads_no_http_client_library_until_a_webhook_is_sent() -> None:
    """httpx (with the rich and pygments it pulls in for its command line) is ~11 MB and ~130 ms of a
    server's start; only the webhook sender uses it. The app, the worker and a sender are made here
    as a server's start makes them."""
    script = (
        "import sys\n"
        "from engram.api.app import create_app\n"
        "from engram.settings import Settings\n"
        "from engram.webhooks.sender import Sender\n"
        "from engram.worker.runner import Worker\n"
        "create_app(Settings())\n"
        "Sender(services=None)\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'rich', 'pygments') if m in sys.modules))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def collector_metric(http: httpx.Client, series: str) -> int:
    """One of the collector's series in /metrics (`engram.heap.collector_metrics`)."""
    found = re.search(rf"^{re.escape(series)} (\d+)$", http.get("/metrics").text, re.MULTILINE)
    assert found, f"{series} is in /metrics"
    return int(found.group(1))


def frozen_objects(http: httpx.Client) -> int:
    return collector_metric(http, "python_gc_objects_frozen")


def test_a_warm_server_leaves_what_it_loaded_out_of_the_collectors_scans(own_server: RunningServer,
                                                                         bank_id: str) -> None:
    """Once the model is loaded, the ~90,000 objects a server imported are frozen (engram.heap): a full
    collection no longer walks them (a 50 ms pause every ~50 recalls before). What requests allocate
    afterwards is still collected: the frozen count does not grow with them (it may shrink: a frozen
    object is still freed when nothing refers to it any more)."""
    with own_server.client() as http:
        deadline = time.monotonic() + 60
        while (frozen := frozen_objects(http)) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert frozen > 20_000, "a warm server's imports are frozen"
        for n in range(5):
            assert retain(http, bank_id, f"Juno counted {n} herons on the lake.").status_code == 200
            http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "herons"}).raise_for_status()
        assert frozen_objects(http) <= frozen, "freezing happens once, at warm-up, not per request"


def young_collections(http: httpx.Client) -> int:
    return collector_metric(http, 'python_gc_collections_total{generation="0"}')


def test_a_recall_of_hundreds_of_facts_runs_no_collection(own_server: RunningServer, bank_id: str) -> None:
    """A recall's rows and results are a few thousand objects the collector tracks, alive until the
    response is sent and then freed by their reference counts. At Python's default threshold (700) they
    set off young collections in every such recall that found nothing to collect (engram.heap)."""
    items = [{"content": f"Juno counted {n} herons by the {('lake', 'river', 'pond')[n % 3]} at dawn."}
             for n in range(300)]
    with own_server.client() as http:
        deadline = time.monotonic() + 60
        while frozen_objects(http) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).raise_for_status()
        body = {"query": "How many herons did Juno count?", "max_tokens": 20_000}
        found = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json=body).json()["results"]
        assert len(found) >= 200, "the recall returns hundreds of facts"
        before = young_collections(http)
        for _ in range(5):
            http.post(f"/v1/default/banks/{bank_id}/memories/recall", json=body).raise_for_status()
        assert young_collections(http) == before
