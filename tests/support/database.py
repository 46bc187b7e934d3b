"""Reaching into a test server's PostgreSQL from the test: one-off queries, and a lock held in a
transaction of its own (to keep a server's request waiting inside its transaction)."""

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
