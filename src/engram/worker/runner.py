"""The background worker: claims operations from the queue and runs their handlers, a few at a time.
Runs inside the server by default, or alone as `engram worker` (any number of them)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from engram.cpu_priority import low_priority
from engram.llm import trace_context
from engram.store import operations as ops
from engram.store.pool import is_unavailable
from engram.worker.handlers import HANDLERS
from engram.worker.idle import IdleSlots

if TYPE_CHECKING:
    from engram.services import Services

log = logging.getLogger("engram.worker")

# How long a lease renewal waits for a pooled connection before it opens one of its own.
LEASE_POOL_WAIT_S = 5.0


# The slots of a worker whose settings leave them to it (`ENGRAM_WORKER_MAX_SLOTS` 0).
SLOTS_WITH_LLM, SLOTS_WITHOUT_LLM = 10, 2


def default_slots(services: Services) -> int:
    """With an LLM, an operation's time is mostly its calls' wait: until session 35 a worker ran two
    at a time, and a hundred async retains of five items, against a model answering in 0.3 s, drained
    in 21.2 s; ten at a time, in 8.0 s (another bank's recall p50 39 ms against 31). Without one,
    operations only share the cores: ten at a time drained a flood of them no faster, and another
    bank's recall took p50 66–79 ms against 40–44 with two."""
    return SLOTS_WITH_LLM if services.llm is not None else SLOTS_WITHOUT_LLM


class Worker:
    def __init__(self, services: Services, *, concurrency: int | None = None) -> None:
        """`concurrency`: the operations it runs at once (its slots); unless given, `ENGRAM_WORKER_MAX_SLOTS`
        or `default_slots`."""
        self.services = services
        self.concurrency = concurrency or services.settings.worker_max_slots or default_slots(services)
        # The process's id; each slot claims under an id of its own (`holder`).
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._idle = IdleSlots()
        # The slots, the webhook sender and the cron schedules poll on the same beat: taking turns,
        # their polls need one pooled connection instead of one each (a PostgreSQL process, ~19 MB
        # resident, apiece).
        self._polling = asyncio.Lock()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        services.wake = self.wake

    def holder(self, slot: int) -> str:
        """The id slot `slot` claims operations under, and every check of its claim uses. Until session
        35 the slots shared the process's id: a slot that took over an operation whose lease another
        slot of the process had lost passed that slot's checks, so both wrote it."""
        return f"{self.worker_id}/{slot}"

    def wake(self) -> None:
        """Look at the queue now rather than at the next poll (one idle slot does)."""
        self._idle.wake()

    async def start(self) -> None:
        from engram.reflect.mental_models import cron_loop
        from engram.webhooks.sender import delivery_loop

        self._tasks = [asyncio.create_task(self._loop(n)) for n in range(self.concurrency)]
        self._tasks.append(asyncio.create_task(cron_loop(self.services, polling=self._polling)))
        self._tasks.append(asyncio.create_task(delivery_loop(self.services, self._polling)))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _loop(self, slot: int) -> None:
        interval = self.services.settings.worker_poll_interval
        unavailable = False  # logged once when the database goes, once when it is back: not every poll
        while not self._stopping:
            try:
                ran = await self.run_one(slot)
            except Exception as exc:  # the database may be restarting: keep the worker alive
                if not is_unavailable(exc):
                    log.exception("worker slot %d: claiming failed", slot)
                elif not unavailable:
                    log.warning("worker slot %d: the database is unavailable (%s: %s); polling until it is back",
                                slot, type(exc).__name__, exc)
                unavailable = is_unavailable(exc)
                ran = False
            else:
                if unavailable:
                    log.info("worker slot %d: the database is back", slot)
                unavailable = False
            if ran:
                continue
            await self._idle.wait(interval)

    async def run_one(self, slot: int = 0) -> bool:
        """Claim and run one operation as slot `slot`; False when the queue is empty."""
        lease = self.services.settings.operation_lease_seconds
        async with self._polling:
            operation = await ops.claim_next(self.services.pool, self.holder(slot), lease)
        if operation is None:
            return False
        # Another slot looks too: more may be queued, and the slot that polled on the interval may be
        # this one, busy now (the next to go idle takes the interval over).
        self.wake()
        # One line per claim and per completion, naming the operation: which process ran what (a
        # reclaimed operation shows in two workers' logs) is then in the logs, not only in the row.
        log.info("worker %s claimed operation %s (%s, bank %s)", operation["worker_id"], operation["id"],
                 operation["operation_type"], operation["bank_id"])
        await self._run(operation, lease)
        return True

    async def _run(self, operation: asyncpg.Record, lease: float) -> None:
        op_id = operation["id"]
        pool = self.services.pool

        async def progress(stage: str, processed: int, total: int) -> None:
            report: dict[str, Any] = {"stage": stage, "at": datetime.now(UTC).isoformat(),
                                      "processed": processed, "total": total}
            await ops.report_progress(pool, op_id, report, lease)

        handler = HANDLERS.get(operation["operation_type"])
        if handler is None:
            await ops.fail(pool, op_id, f"unknown operation type {operation['operation_type']!r}")
            return
        keeper = asyncio.create_task(self._keep_lease(op_id, lease, operation["worker_id"]))
        trace = trace_context.use(operation["bank_id"], operation["operation_type"], op_id)
        try:
            with low_priority():  # no one waits on a queued operation's CPU work as it happens
                result = await handler(self.services, operation, progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            if is_unavailable(exc):
                reason = f"the database was unavailable ({reason}); retry the operation"
            log.warning("operation %s (%s) failed: %s", op_id, operation["operation_type"], reason)
            await self._finish(operation, None, reason)
            return
        finally:
            keeper.cancel()
            trace_context.CURRENT.reset(trace)
        await self._finish(operation, result, None)

    async def _finish(self, operation: asyncpg.Record, result: dict[str, Any] | None, reason: str | None) -> None:
        """Record the outcome of `operation` (the row as the slot claimed it: its `worker_id` is the
        slot's) and, in the same transaction, the webhook deliveries it fires: an event is queued exactly
        when the operation is recorded finished. A webhook problem never fails the operation."""
        from engram.webhooks.events import record_operation_event

        holder = operation["worker_id"]
        async with self.services.pool.acquire() as conn, conn.transaction():
            if reason is None:
                recorded = await ops.complete(conn, operation["id"], result or {}, holder)
            else:
                recorded = await ops.fail(conn, operation["id"], reason, holder)
            if not recorded:
                log.warning("worker %s no longer holds operation %s (its lease ran out and another worker "
                            "took it over, or its bank was deleted): its outcome here is not recorded",
                            holder, operation["id"])
                return
            try:
                async with conn.transaction():
                    await record_operation_event(conn, operation, "failed" if reason else "completed", result, reason)
            except Exception:
                log.exception("operation %s: queueing its webhook event failed", operation["id"])
        if reason is None:
            log.info("worker %s completed operation %s (%s)", holder, operation["id"],
                     operation["operation_type"])

    async def _keep_lease(self, op_id: uuid.UUID, lease: float, holder: str) -> None:
        """Extend the lease while the handler runs: a live worker keeps its operation through a long LLM
        call; a dead one stops extending it, and the operation is reclaimed when the lease runs out."""
        while True:
            await asyncio.sleep(lease / 3)
            try:
                await self.extend_lease(op_id, lease, holder)
            except Exception as exc:  # the database may be restarting: the next beat tries again
                log.warning("operation %s: extending the lease failed: %s", op_id, exc)

    async def extend_lease(self, op_id: uuid.UUID, lease: float, holder: str) -> None:
        """One renewal, on a pooled connection or, when none comes within LEASE_POOL_WAIT_S, on one of
        its own: with every pooled connection taken for longer than the lease (twenty requests waiting
        for an import did it until session 31), a live worker lost its operation, which a second slot
        then claimed and ran again beside the first."""
        pool = self.services.pool
        try:
            conn = await pool.acquire(timeout=LEASE_POOL_WAIT_S)
        except TimeoutError:
            log.warning("operation %s: no pooled connection in %.0f s; extending its lease on a connection of "
                        "its own", op_id, LEASE_POOL_WAIT_S)
            own = await asyncpg.connect(self.services.store.dsn, timeout=10)
            try:
                await ops.extend_lease(own, op_id, holder, lease)
            finally:
                await own.close()
            return
        try:
            await ops.extend_lease(conn, op_id, holder, lease)
        finally:
            await pool.release(conn)
