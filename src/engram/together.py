"""Coroutines run at once that stand or fall together.

`asyncio.gather` hands the first failure to its caller but leaves the other coroutines running: a
retain whose first chunk's LLM call failed answered 502 while its other chunks went on calling the
model (each call paid for, each holding one of the process's LLM slots), and an entity-summary
operation reported failed went on writing summaries. `asyncio.TaskGroup` cancels them but raises an
ExceptionGroup, which would hide the failure's own type from the error handling (a 4xx, a retryable
failed operation) that depends on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def run_together(coroutines: Iterable[Awaitable[T]]) -> list[T]:
    """Their results, in order. The first to fail (or the caller's cancellation) cancels the others
    and waits for them to end before its exception is raised as it is."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()  # nothing for a task already done
        await asyncio.gather(*tasks, return_exceptions=True)
