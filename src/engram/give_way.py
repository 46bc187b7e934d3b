"""Work no one waits on pauses between its steps while a request someone waits on is under way.

`engram.cpu_priority` lowers the priority of the threads of a bulk or queued retain, but what it does on
the event loop (its LLM calls' answers, its facts' parameters) and in PostgreSQL (its inserts, its
links) shares the cores with a recall on equal terms: on two cores, with another client bulk-ingesting,
a recall's p95 was 2.5-3.1 times its p95 alone. So a recall and a one-chunk retain's write mark
themselves `waited_on()`, and low-priority work calls `give_way()` between its steps (before each
chunk's extraction, its transaction, each batch of facts written, the links): while a request is
marked, it waits for the marked ones to end, for at most GIVE_WAY_MAX_S at each step, so a stream of
requests slows it and never stops it. A step under way goes on (a statement is not interrupted).

Marks and waits are per event loop; a request made by low-priority work (a consolidation's recall)
marks nothing."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator

from engram.cpu_priority import at_low_priority

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


@contextlib.contextmanager
def waited_on() -> Iterator[None]:
    """Mark the block as a request someone waits on (unless it runs at low priority itself)."""
    if at_low_priority():
        yield
        return
    loop = _this_loop()
    loop.marked += 1
    loop.none_marked.clear()
    try:
        yield
    finally:
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
