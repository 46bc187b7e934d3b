"""Reaching into a test server's PostgreSQL from the test: one-off queries, a connection kept open
for many, and a lock held in a transaction of its own (to keep a server's request waiting inside its transaction)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg


def _on_own_thread(work: Any) -> Any:
    """Run a coroutine function on a thread and loop of its own: the test thread may hold a loop."""
    done: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            done.append(asyncio.run(work()))
        except BaseException as exc:  # re-raised on the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    if errors:
        raise errors[0]
    return done[0]


class KeptConnection:
    """One connection kept open on a thread and loop of its own, for a test that queries in a tight
    loop: a new connection for each query (`query`) costs milliseconds, this about one."""

    def __init__(self, dsn: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kept-connection", daemon=True)
        self._thread.start()
        self._conn = self._run(asyncpg.connect(dsn))

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)

    def fetch(self, statement: str, *args: Any) -> list[asyncpg.Record]:
        return self._run(self._conn.fetch(statement, *args))

    def close(self) -> None:
        self._run(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


@contextmanager
def kept_connection(dsn: str) -> Iterator[KeptConnection]:
    connection = KeptConnection(dsn)
    try:
        yield connection
    finally:
        connection.close()


def query(dsn: str, statement: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(statement, *args)
        finally:
            await conn.close()

    return _on_own_thread(run)


@contextmanager
def table_locked(dsn: str, table: str, mode: str) -> Iterator[None]:
    """Hold `LOCK TABLE table IN mode MODE` in an open transaction until the block ends."""
    locked, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    async def hold() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction():
                await conn.execute(f"LOCK TABLE {table} IN {mode} MODE")
                locked.set()
                await asyncio.to_thread(release.wait, 120)
        finally:
            await conn.close()

    def target() -> None:
        try:
            asyncio.run(hold())
        except BaseException as exc:
            errors.append(exc)
            locked.set()

    thread = threading.Thread(target=target)
    thread.start()
    locked.wait(30)
    try:
        if errors:
            raise errors[0]
        yield
    finally:
        release.set()
        thread.join(30)


def shared_memory_keys(pgdata: Path) -> list[int]:
    """The System V shared memory segments of the server on `pgdata`: PostgreSQL numbers its key from
    the data directory's inode, counting up past keys in use."""
    first = pgdata.stat().st_ino & 0xFFFFFFFF
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    keys = [int(line.split()[0]) & 0xFFFFFFFF for line in lines]
    return sorted(key for key in keys if first <= key < first + 100)
