"""A worker's idle slots: which of them looks at the queue, and when."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class IdleSlots:
    """The slots of one worker that found the queue empty.

    A wake-up (`wake`: a request of this process queued an operation, or a slot has just claimed one
    and more may be waiting) sends one idle slot to the queue, not all of them: with ten slots, ten
    claims for one operation were nine that found nothing. A wake-up that finds no slot idle is kept
    for the next one to go idle, so none is lost between a slot's empty claim and its wait.

    One idle slot at a time also looks every `interval` (`wait`), for what other processes queue and
    for leases that run out. With each slot on a timer of its own, an idle server with an LLM (ten
    slots) claimed twenty times a second."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._wake_kept = False
        self._timer_held = False

    def wake(self) -> None:
        """Send one idle slot to the queue now (or the next slot to go idle)."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._wake_kept = True

    async def wait(self, interval: float) -> None:
        """Return when this slot should look at the queue again."""
        if self._wake_kept:
            self._wake_kept = False
            return
        timed = not self._timer_held
        self._timer_held = True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, timeout=interval if timed else None)
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            if timed:
                self._timer_held = False
