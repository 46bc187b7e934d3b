"""Keeps the embedded PostgreSQL running: a task that checks the postmaster every second and, when it
has died (killed, crashed, stopped by hand), starts it again with a bounded exponential backoff,
logging every attempt. Every process using the data directory runs one; the data directory's lock
makes the first to notice start the server and the others join it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncpg

    from engram.store.embedded import EmbeddedPostgres

log = logging.getLogger("engram.store")

CHECK_INTERVAL = 1.0
FIRST_RETRY = 1.0
MAX_RETRY = 30.0


class PostgresSupervisor:
    def __init__(self, embedded: EmbeddedPostgres, pool: asyncpg.Pool, *, interval: float = CHECK_INTERVAL,
                 first_retry: float = FIRST_RETRY, max_retry: float = MAX_RETRY) -> None:
        self.embedded = embedded
        self.pool = pool
        self.interval = interval
        self.first_retry = first_retry
        self.max_retry = max_retry
        self.restarts = 0  # recoveries so far, whoever started the server again
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="postgres-supervisor")

    async def stop(self) -> None:
        """Stop watching. A start in progress finishes first, so the server is never left half-booted."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        while not await self._pause(self.interval):
            if not self.embedded.postmaster_alive():
                await self._recover()

    async def _recover(self) -> None:
        server = self.embedded.server
        log.error("the embedded PostgreSQL (pid %s) is gone; starting it again (log: %s)",
                  server.pid if server else "?", self.embedded.log_path)
        began, delay, attempt = time.monotonic(), self.first_retry, 0
        while not self._stopping.is_set():
            attempt += 1
            try:
                # Blocking (pg_ctl, waiting for orphaned backends): off the event loop, which keeps
                # answering 503s meanwhile.
                booted = await asyncio.to_thread(self.embedded.recover)
            except Exception as exc:  # any failure is retried: the supervisor must outlive it
                # The first failure with the log's tail; later ones in a line each (the tail repeats).
                first_line = (str(exc).split("; end of")[0].splitlines() or [type(exc).__name__])[0]
                reason = str(exc) if attempt == 1 else f"{first_line} (see {self.embedded.log_path})"
                log.warning("starting the embedded PostgreSQL failed (attempt %d): %s; next attempt in %.0f s",
                            attempt, reason, delay)
                if await self._pause(delay):
                    return
                delay = min(delay * 2, self.max_retry)
                continue
            await self.pool.expire_connections()  # connections to the dead server are replaced on next use
            self.restarts += 1
            log.warning("the embedded PostgreSQL is back (pid %d, %s) after %.1f s and %d attempt(s)",
                        self.embedded.server.pid if self.embedded.server else -1,
                        "started by this process" if booted else "started by another process",
                        time.monotonic() - began, attempt)
            return

    async def _pause(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if asked to stop; True when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        return self._stopping.is_set()
