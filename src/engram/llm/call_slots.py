"""How many LLM calls a process has in flight at once (`ENGRAM_LLM_MAX_CONCURRENT`, Hindsight's
`HINDSIGHT_API_LLM_MAX_CONCURRENT`, 32 by default), and how many of them one retain may take.

A retain extracts its chunks several at a time. Until session 35 each retain took four at a time and
nothing bounded the process: a 100-item retain against a model answering in 0.5 s took 12.9 s (4.3 s
now), and thirty retains at once could send 120 calls to the provider (and into its rate limits). Now
every call waits for one of the process's slots, first come first served, and a retain takes at most
half of them at once: while one bulk retain runs, a one-item retain's call finds a slot free, and two
bulk retains share the slots between them. The worker's operations (queued retains, consolidations,
summaries, mental models) hold at most half the slots in all, so however many of them run, a
request's call never waits behind theirs."""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

from engram.llm import trace_context
from engram.llm.base import LLMProvider, LLMResponse
from engram.metrics import REGISTRY


def retain_share(limit: int) -> int:
    """The chunks one retain extracts at once, and the slots queued work may hold in all: half the
    process's slots, one at least."""
    return max(1, limit // 2)


class _Slots:
    """One event loop's slots: every call takes one of `every`; a queued operation's call first takes
    one of `queued` (half as many)."""

    def __init__(self, limit: int) -> None:
        self.every = asyncio.Semaphore(limit)
        self.queued = asyncio.Semaphore(retain_share(limit))


class BoundedProvider:
    """An LLM provider whose calls, across the process's event loop, number at most `limit` at once."""

    def __init__(self, inner: LLMProvider, limit: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.limit = limit
        # A semaphore belongs to one event loop; a library user may run the provider on several.
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()

    def _slots(self) -> _Slots:
        loop = asyncio.get_running_loop()
        slots = self._by_loop.get(loop)
        if slots is None:
            slots = self._by_loop[loop] = _Slots(self.limit)
        return slots

    async def complete(self, messages: list[dict[str, Any]], **options: Any) -> LLMResponse:
        slots = self._slots()
        # The worker runs a queued operation with its id in the call context; a request has none.
        queued = trace_context.current().operation_id is not None
        if queued:
            await _take(slots.queued)
        try:
            await _take(slots.every)
            try:
                return await self.inner.complete(messages, **options)
            finally:
                slots.every.release()
        finally:
            if queued:
                slots.queued.release()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _take(slots: asyncio.Semaphore) -> None:
    if not slots.locked():
        await slots.acquire()
        return
    waited_from = time.perf_counter()  # every slot taken: counted, so /metrics shows when the limit holds work up
    await slots.acquire()
    REGISTRY.count("engram_llm_slot_waits_total")
    REGISTRY.count("engram_llm_slot_wait_seconds_total", time.perf_counter() - waited_from)
