"""Work a request starts and does not wait for: held here until it ends (the event loop keeps only a
weak reference to a task), its failure logged, never raised to anyone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("engram")

_running: set[asyncio.Task[Any]] = set()


def running(name: str) -> bool:
    """Whether background work of this name is under way."""
    return any(task.get_name() == name for task in _running)


def in_background(work: Callable[[], Awaitable[Any]], name: str, failed: str) -> None:
    """Run `work()` as a task named `name`; `failed` is logged with the traceback if it raises."""

    async def run() -> None:
        try:
            await work()
        except Exception:
            log.exception(failed)

    task = asyncio.get_running_loop().create_task(run(), name=name)
    _running.add(task)
    task.add_done_callback(_running.discard)
