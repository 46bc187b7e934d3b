"""Shared fixtures: one embedded PostgreSQL for the session, and real Engram servers (subprocesses
speaking HTTP on 127.0.0.1) — one with no LLM, one whose LLM is the scripted endpoint."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engram.store.embedded import EmbeddedPostgres
from tests.support.scripted_llm import ScriptedLLM

ARTIFACTS = Path(__file__).parent / "artifacts"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    home = Path(tempfile.mkdtemp(prefix="engram-test-"))
    server = EmbeddedPostgres(home)
    dsn = server.start()
    try:
        yield dsn
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def _admin(dsn: str, sql: str) -> None:
    """Run one statement on its own thread: asyncio.run on the test thread would leave it without an
    event loop, which breaks clients (hindsight-client) that keep a loop for the thread."""
    import asyncio
    import threading

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # re-raised on the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


@contextmanager
def separate_database(pg_dsn: str) -> Iterator[str]:
    """A database of its own on the session's PostgreSQL. Servers sharing a database share the
    operations queue (that is how workers scale out), so each test server gets its own."""
    name = f"engram_{uuid.uuid4().hex[:8]}"
    _admin(pg_dsn, f"CREATE DATABASE {name}")
    try:
        yield pg_dsn.replace("/engram?", f"/{name}?")
    finally:
        _admin(pg_dsn, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def isolated_dsn(pg_dsn: str) -> Iterator[str]:
    with separate_database(pg_dsn) as dsn:
        yield dsn


@dataclass
class RunningServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_server(dsn: str, extra_env: dict[str, str] | None = None, name: str = "server",
                 args: tuple[str, ...] = ()) -> RunningServer:
    """Run `engram serve [args]` as a real process and wait until /health answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    env.update({"ENGRAM_DATABASE_URL": dsn, "ENGRAM_WORKER_POLL_INTERVAL": "0.2", **(extra_env or {})})
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"{name}-{port}.log"
    handle = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "engram.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        env=env, stdout=handle, stderr=subprocess.STDOUT,
    )
    server = RunningServer(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(server.url + "/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not become healthy:\n{server.log()}")


@pytest.fixture(scope="session")
def server(pg_dsn: str) -> Iterator[RunningServer]:
    """An Engram server with no LLM configured (the offline pipeline)."""
    running = start_server(pg_dsn, name="offline")
    yield running
    running.stop()


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@contextmanager
def scripted_server(pg_dsn: str, llm: ScriptedLLM, name: str, **env: str) -> Iterator[tuple[RunningServer, str]]:
    """A server whose LLM is the scripted endpoint (no retries, a 5 s timeout unless `env` says
    otherwise), on a database of its own whose DSN comes with it: tests can read and change its rows."""
    settings = {**llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "ENGRAM_LLM_TIMEOUT": "5", **env}
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, settings, name=name)
        try:
            yield running, dsn
        finally:
            running.stop()


@pytest.fixture(scope="session")
def llm_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    """An Engram server whose LLM is the scripted OpenAI-compatible endpoint (its own database)."""
    with scripted_server(pg_dsn, scripted_llm, "scripted-llm") as (running, _):
        yield running


@pytest.fixture
def llm(scripted_llm: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm.reset()
    yield scripted_llm
    scripted_llm.reset()


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def bank_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"
