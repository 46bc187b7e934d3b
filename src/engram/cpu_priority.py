"""Work no one waits on as it happens runs at a lower CPU priority than the requests someone waits on.

A bulk or queued retain, a consolidation, an import or a re-embedding keeps the server's CPU busy for
seconds to hours, most of it in threads: the embedder (~60 % of a bulk item's server CPU), the offline
extractor and the entity-name scoring (~1 ms of a bulk item's ~4.5 offline). A recall or a one-item
retain arriving meanwhile shared the cores with it and took about twice as long. Inside
`low_priority()` that work runs on threads of their own whose nice value is `LOW_PRIORITY_NICE` above
the process's (Linux schedules threads apart): the model's runs on the embedder's low-priority pool,
and what `to_thread` hands off on a low-priority executor. When both want a core, the waiting request
gets it; when nothing else runs, the low-priority work has the cores as before. What runs on the
event loop and in PostgreSQL keeps the same priority for both.

The flag is a context variable: tasks started inside the block and `to_thread` calls carry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

LOW_PRIORITY_NICE = 10
MAX_NICE = 19

T = TypeVar("T")

_low: contextvars.ContextVar[bool] = contextvars.ContextVar("engram_low_priority", default=False)
_this_thread = threading.local()
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


@contextlib.contextmanager
def low_priority(enabled: bool = True) -> Iterator[None]:
    """CPU work done inside the block, and in the tasks and `to_thread` calls it starts, runs at low
    priority (`enabled` False: as it would without the block)."""
    if not enabled:
        yield
        return
    token = _low.set(True)
    try:
        yield
    finally:
        _low.reset(token)


def at_low_priority() -> bool:
    return _low.get()


def on_a_low_priority_thread() -> bool:
    """Whether the calling thread is one of the low-priority ones (the executor's, the embedder's pool)."""
    return getattr(_this_thread, "low", False)


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread`, on the low-priority executor when `at_low_priority()`."""
    if not at_low_priority():
        return await asyncio.to_thread(fn, *args, **kwargs)
    context = contextvars.copy_context()  # as asyncio.to_thread does: the thread sees the flag too
    return await asyncio.get_running_loop().run_in_executor(
        _low_priority_executor(), functools.partial(context.run, fn, *args, **kwargs))


def _low_priority_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:  # as many threads as asyncio's default executor
                _executor = ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4),
                                               thread_name_prefix="engram-low-priority",
                                               initializer=lower_this_threads_priority)
    return _executor


def lower_this_threads_priority() -> None:
    """Raise the calling thread's nice value by LOW_PRIORITY_NICE (at most to 19). A thread's priority
    can be lowered but not raised back without privileges, so only threads that do low-priority work
    alone call this. Only on Linux, where a thread has a nice value of its own: elsewhere the id of a
    thread given to setpriority would name a process."""
    _this_thread.low = True
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        thread = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(MAX_NICE, nice + LOW_PRIORITY_NICE))
