"""Work spread on a second pooled connection beside the caller's, when the pool has one to spare.

Used where PostgreSQL alone works and the caller waits (recall's semantic and graph arms, the
statistics job): on one connection the second core would idle through it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

# How long a caller waits for its spare connection, once the pool showed one idle, before it does the
# work on the one it has.
SPARE_ACQUIRE_TIMEOUT_S = 0.05


async def spare_connection(pool: asyncpg.Pool, timeout_s: float = SPARE_ACQUIRE_TIMEOUT_S) -> asyncpg.Connection | None:
    """A second connection when the pool shows one idle and hands it over within `timeout_s`, else None.
    The caller already holds a connection: callers that all waited long for a second one would wait on
    each other for ever, and under load each would add the wait to its time."""
    if pool.get_idle_size() == 0:
        return None
    with contextlib.suppress(TimeoutError):
        return await pool.acquire(timeout=timeout_s)
    return None


async def together_then_release(pool: asyncpg.Pool, spare: asyncpg.Connection, *steps: Awaitable[Any]) -> list[Any]:
    """The results of `steps`, awaited at once; `spare` goes back to the pool only once all have ended,
    even when one failed, and the first failure is raised."""
    try:
        return await together(*steps)
    finally:
        await pool.release(spare)


async def together(*steps: Awaitable[Any]) -> list[Any]:
    """The results of `steps`, awaited at once, or the first failure raised once all have ended (so
    that the connections they use are free again when the caller hears of it)."""
    return results_or_first_failure(await asyncio.gather(*steps, return_exceptions=True))


async def each_when_free(
    first: asyncpg.Connection, second: asyncpg.Connection,
    steps: list[Callable[[asyncpg.Connection], Awaitable[Any]]],
) -> list[Any]:
    """The results of `steps` (each given the connection it runs on), in their order: `first` takes
    the first step, `second` the second, and each connection the next one left once it is free. After
    a failure neither takes another; the failure is raised once both are idle again (`together`)."""
    results: list[Any] = [None] * len(steps)
    left = iter(enumerate(steps))  # shared: each connection takes the next step when it is free
    failed = False

    async def take_steps(conn: asyncpg.Connection) -> None:
        nonlocal failed
        for index, step in left:
            if failed:
                return
            try:
                results[index] = await step(conn)
            except BaseException:
                failed = True
                raise

    await together(take_steps(first), take_steps(second))
    return results


def results_or_first_failure(outcomes: list[Any]) -> list[Any]:
    """What `gather(..., return_exceptions=True)` returned, or its first failure raised: the steps all
    ended before their connections went back to the pool, whichever failed."""
    failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failed:
        raise failed[0]
    return outcomes


# How long a progress report waits for a pooled connection before it is skipped.
REPORT_ACQUIRE_TIMEOUT_S = 1.0


async def report_beside(pool: asyncpg.Pool, sql: str, *args: Any, timeout_s: float = REPORT_ACQUIRE_TIMEOUT_S) -> bool:
    """Run a progress report's statement on a pooled connection, or skip it (False) when none comes
    within `timeout_s`. The reporter is in the middle of a write, often inside a transaction that
    holds the bank's locks: when every pooled connection was taken by requests waiting for those
    locks, an unbounded wait for one hung the write and every request behind it (PostgreSQL sees no
    deadlock: the holder waits in Python). A skipped report is made good by the next one."""
    try:
        conn = await pool.acquire(timeout=timeout_s)
    except TimeoutError:
        return False
    try:
        await conn.execute(sql, *args)
    finally:
        await pool.release(conn)
    return True
