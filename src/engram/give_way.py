"""Work no one waits on pauses between its steps while a request someone waits on is under way.

`engram.cpu_priority` lowers the priority of the threads of a bulk or queued retain, but what it does on
the event loop (its LLM calls' answers, its facts' parameters) and in PostgreSQL (its inserts, its
links) shares the cores with a recall on equal terms: on two cores, with another client bulk-ingesting,
a recall's p95 was 2.5-3.1 times its p95 alone. So a recall and a one-chunk retain's write mark
themselves `waited_on()`, and low-priority work calls `give_way()` between its steps (before each
chunk's extraction, its transaction, each batch of facts written, the links): while a request is
marked, it waits for the marked ones to end, for at most GIVE_WAY_MAX_S at each step, so a stream of
requests slows it and never stops it. A step under way goes on (a statement is not interrupted).

The embedder's low-priority threads do the same before each run of the model
(`give_way_on_this_thread`): niced, they still took a share of the cores and of their caches from the
recall under way. During another client's bulk ingest a recall's p50 and p95 were 1.5-2.2 and 2.2-2.5
times those alone with the steps' waits only, 1.0-1.4 and 1.3-2.1 times with these as well
(`bench/client_perf.py --llm`, five runs each).

Marks and `give_way()` waits are per event loop; the threads' waits see the marks of every loop of the
process. A request made by low-priority work (a consolidation's recall) marks nothing."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Iterator

from engram.cpu_priority import at_low_priority, on_a_low_priority_thread

GIVE_WAY_MAX_S = 0.05


class _Loop:
    """One event loop's marked requests, and an event set while there are none."""

    def __init__(self) -> None:
        self.marked = 0
        self.none_marked = asyncio.Event()
        self.none_marked.set()


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = weakref.WeakKeyDictionary()


def _this_loop() -> _Loop:
    running = asyncio.get_running_loop()
    if (loop := _loops.get(running)) is None:
        loop = _loops[running] = _Loop()
    return loop


class _Process:
    """The marked requests of every event loop of the process, for the low-priority threads to wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.marked = 0
        self.none_marked = threading.Event()
        self.none_marked.set()

    def add(self, change: int) -> None:
        with self._lock:
            self.marked += change
            if self.marked:
                self.none_marked.clear()
            else:
                self.none_marked.set()


_process = _Process()


@contextlib.contextmanager
def waited_on() -> Iterator[None]:
    """Mark the block as a request someone waits on (unless it runs at low priority itself)."""
    if at_low_priority():
        yield
        return
    loop = _this_loop()
    loop.marked += 1
    loop.none_marked.clear()
    _process.add(1)
    try:
        yield
    finally:
        _process.add(-1)
        loop.marked -= 1
        if loop.marked == 0:
            loop.none_marked.set()


async def give_way() -> None:
    """At low priority, wait while requests are marked, at most GIVE_WAY_MAX_S; otherwise return at once."""
    if not at_low_priority():
        return
    loop = _this_loop()
    if loop.marked:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(loop.none_marked.wait(), GIVE_WAY_MAX_S)


def give_way_on_this_thread() -> None:
    """On a low-priority thread (`engram.cpu_priority`), block while requests are marked, at most
    GIVE_WAY_MAX_S; on any other thread, return at once. The count is read without the lock: a change
    racing with the read costs one run's wait or one run's going ahead, both bounded."""
    if _process.marked and on_a_low_priority_thread():
        _process.none_marked.wait(GIVE_WAY_MAX_S)
