"""The embedded PostgreSQL is supervised. `kill -9` of its postmaster under a running `engram serve`
(on its own ENGRAM_HOME, no ENGRAM_DATABASE_URL): /health answers 503 while it is down, the server
starts it again by itself, and what was acknowledged before is still there. Two servers on one
ENGRAM_HOME: whichever leaves first, the other keeps its database; the last one out stops it, and a
server that crashed does not count."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram.errors import StoreUnavailable
from engram.store.embedded import EmbeddedPostgres, Postmaster, running_server
from tests.conftest import RunningServer, start_server
from tests.support.database import shared_memory_keys
from tests.support.faults import facts, retain, wait_for


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="engram-supervised-"))
    yield path
    if running_server(path / "pg") is not None:  # a failed test left it running: join it and leave last
        leftover = EmbeddedPostgres(path)
        leftover.start()
        leftover.stop()
    shutil.rmtree(path, ignore_errors=True)


def serve(home: Path, name: str) -> RunningServer:
    return start_server("", {"ENGRAM_HOME": str(home)}, name=name)  # an empty URL: the embedded server


def postmaster(home: Path) -> Postmaster:
    server = running_server(home / "pg")
    assert server is not None, "PostgreSQL runs on the home"
    return server


def postmaster_pid(home: Path) -> int | None:
    """The pid of the postmaster serving the home, or None while there is none (the killed server's
    backends may still be exiting: `running_server` then refuses to clear its lock file yet)."""
    try:
        server = running_server(home / "pg")
    except StoreUnavailable:
        return None
    return None if server is None else server.pid


def status(http: httpx.Client, path: str) -> int:
    try:
        return http.get(path, timeout=10).status_code
    except httpx.HTTPError:
        return 0


def test_a_killed_postmaster_is_started_again_without_restarting_engram(home: Path, bank_id: str) -> None:
    server = serve(home, "supervised")
    try:
        with server.client() as http:
            before = [f"Ileana {n} restored the frescoes of chapel {n}." for n in range(3)]
            for text in before:
                assert retain(http, bank_id, text).status_code == 200
            killed = postmaster(home).pid
            segments = shared_memory_keys(home / "pg")
            os.kill(killed, signal.SIGKILL)

            wait_for(lambda: status(http, "/health") == 503, "/health to answer 503 while PostgreSQL is down", 15)
            down = http.get("/health")  # may already be back: only a 503 is checked further
            if down.status_code == 503:
                assert down.json()["status"] == "unhealthy"
                assert down.headers["Retry-After"]
            assert http.get("/health/live").status_code == 200, "the process is alive throughout"

            wait_for(lambda: status(http, "/health") == 200, "the server to start PostgreSQL again", 90)
            assert server.process.poll() is None, "Engram itself was not restarted"
            assert postmaster(home).pid != killed
            assert http.get("/health").json() == {"status": "healthy", "database": "connected"}
            assert http.get("/health/ready").status_code == 200
            after = f"Ileana {bank_id} signed the last fresco after the crash."
            assert retain(http, bank_id, after).status_code == 200
            assert facts(http, bank_id) == sorted([*before, after]), "nothing acknowledged was lost"
            assert shared_memory_keys(home / "pg") == segments, "the dead server's shared memory was reused"
        log = server.log()
        assert f"the embedded PostgreSQL (pid {killed}) is gone" in log
        # /health may answer before the supervisor has logged its recovery.
        wait_for(lambda: "the embedded PostgreSQL is back" in server.log(), "the recovery to be logged", 15)
    finally:
        server.stop()
    assert running_server(home / "pg") is None, "the only user stopped it on its way out"


def test_while_postgres_cannot_start_the_server_answers_503_and_keeps_trying(home: Path, bank_id: str) -> None:
    server = serve(home, "supervised-backoff")
    auto_conf = home / "pg" / "postgresql.auto.conf"
    original = auto_conf.read_text()
    try:
        with server.client() as http:
            assert retain(http, bank_id, "Tudor fired the pottery kiln.").status_code == 200
            auto_conf.write_text(original + "shared_buffers = 'plenty'\n")  # every start fails now
            os.kill(postmaster(home).pid, signal.SIGKILL)
            wait_for(lambda: "starting the embedded PostgreSQL failed (attempt 3)" in server.log(),
                     "the supervisor to retry", 60)
            health, ready = http.get("/health"), http.get("/health/ready")
            assert health.status_code == 503 and health.json()["status"] == "unhealthy", health.text
            assert ready.status_code == 503 and ready.json()["status"] == "not ready", ready.text
            assert int(health.headers["Retry-After"]) > 0
            assert http.get("/health/live").status_code == 200
            refused = retain(http, bank_id, "Tudor glazed forty bowls.")
            assert refused.status_code == 503, refused.text
            assert "Retry-After" in refused.headers

            auto_conf.write_text(original)
            wait_for(lambda: status(http, "/health") == 200, "the next attempt to start PostgreSQL", 60)
            assert retain(http, bank_id, "Tudor glazed forty bowls.").status_code == 200
            assert facts(http, bank_id) == ["Tudor fired the pottery kiln.", "Tudor glazed forty bowls."]
        log = server.log()
        assert "shared_buffers" in log, "each failed attempt is logged with its reason"
        assert "next attempt in 1 s" in log and "next attempt in 2 s" in log and "next attempt in 4 s" in log
    finally:
        auto_conf.write_text(original)
        server.stop()


def test_the_first_server_on_a_home_stopping_leaves_postgres_to_the_second(home: Path, bank_id: str) -> None:
    first, second = serve(home, "home-first"), serve(home, "home-second")
    try:
        with second.client() as http:
            assert retain(http, bank_id, "Mircea tiled the roof of the mill.").status_code == 200
            shared = postmaster(home).pid
            first.stop()  # SIGTERM: a normal shutdown
            assert first.process.returncode in (0, -signal.SIGTERM), first.log()  # uvicorn re-raises it
            assert postmaster(home).pid == shared, "PostgreSQL kept running under the second server"
            assert http.get("/health").status_code == 200
            assert retain(http, bank_id, "Mircea painted the mill's door green.").status_code == 200
            assert facts(http, bank_id) == ["Mircea painted the mill's door green.",
                                            "Mircea tiled the roof of the mill."]
        second.stop()
        assert running_server(home / "pg") is None, "the last one out stops PostgreSQL"
    finally:
        first.stop()
        second.stop()


def test_a_crashed_server_does_not_keep_postgres_running(home: Path, bank_id: str) -> None:
    crashed, survivor = serve(home, "home-crashed"), serve(home, "home-survivor")
    try:
        shared = postmaster(home).pid
        crashed.process.kill()
        crashed.process.wait(10)
        with survivor.client() as http:
            assert retain(http, bank_id, "Sorin counted the storks on the chimneys.").status_code == 200
        assert postmaster(home).pid == shared
        survivor.stop()
        assert running_server(home / "pg") is None, "the crashed server's registration did not count"
    finally:
        survivor.stop()


def test_with_two_servers_on_a_home_one_starts_the_killed_postmaster_and_the_other_joins_it(
    home: Path, bank_id: str
) -> None:
    servers = [serve(home, "home-racer-a"), serve(home, "home-racer-b")]
    clients = [server.client() for server in servers]
    lines = ["Lucia ground flour at the water mill.", "Lucia sold the flour in Brasov."]
    try:
        assert retain(clients[0], bank_id, lines[0]).status_code == 200
        killed = postmaster(home).pid
        os.kill(killed, signal.SIGKILL)
        # A backend that has not yet noticed its postmaster's death can still answer /health's probe
        # for a moment: first the new postmaster, then every server healthy through it.
        wait_for(lambda: postmaster_pid(home) not in (None, killed), "PostgreSQL to run again", 90)
        for http in clients:
            wait_for(lambda http=http: status(http, "/health") == 200, "every server to be healthy again", 90)
        assert postmaster(home).pid != killed
        assert retain(clients[1], bank_id, lines[1]).status_code == 200
        assert facts(clients[0], bank_id) == lines
        wait_for(lambda: all("the embedded PostgreSQL is back" in server.log() for server in servers),
                 "both supervisors to report the server back", 30)
        logs = [server.log() for server in servers]
        assert sum("started by this process" in log for log in logs) == 1, "exactly one of them started it"
        assert sum("started by another process" in log for log in logs) == 1
    finally:
        for http in clients:
            http.close()
        for server in servers:
            server.stop()
    assert running_server(home / "pg") is None


def test_the_launcher_that_started_the_server_leaving_first_leaves_it_to_the_one_that_joined(home: Path) -> None:
    starter, joiner = EmbeddedPostgres(home), EmbeddedPostgres(home)
    starter.start()
    joiner.start()
    assert starter.started_here and not joiner.started_here
    serving = postmaster(home).pid
    starter.stop()
    assert postmaster(home).pid == serving, "still running for the one that joined"
    joiner.stop()
    assert running_server(home / "pg") is None, "the last one out stopped it"
