"""A worker's idle slots (engram.worker.idle): one wake-up sends one slot, one slot keeps the interval,
and a wake-up no slot was waiting for is kept for the next."""

from __future__ import annotations

import asyncio
import time

from engram.worker.idle import IdleSlots


async def test_only_the_first_idle_slot_keeps_the_interval_and_a_wake_up_sends_one() -> None:
    slots = IdleSlots()
    timed = asyncio.create_task(slots.wait(0.2))  # the first to go idle keeps the interval
    untimed = [asyncio.create_task(slots.wait(0.2)) for _ in range(3)]
    await asyncio.sleep(0.4)
    assert timed.done() and not any(task.done() for task in untimed), "one slot looks on the interval"
    slots.wake()
    await asyncio.sleep(0.05)
    assert sum(task.done() for task in untimed) == 1, "one wake-up, one slot"
    for task in untimed:
        task.cancel()
    await asyncio.gather(*untimed, return_exceptions=True)


async def test_a_wake_up_while_no_slot_waits_is_kept_for_the_next() -> None:
    slots = IdleSlots()
    slots.wake()  # every slot busy, or between its empty claim and its wait
    started = time.monotonic()
    await asyncio.wait_for(slots.wait(60), 1)
    assert time.monotonic() - started < 0.5
    waiting = asyncio.create_task(slots.wait(60))
    await asyncio.sleep(0.05)
    assert not waiting.done(), "kept once, not for ever"
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


async def test_once_the_interval_keeper_leaves_the_next_slot_to_go_idle_keeps_it() -> None:
    slots = IdleSlots()
    keeper = asyncio.create_task(slots.wait(0.1))
    other = asyncio.create_task(slots.wait(0.1))
    await keeper  # returned on its interval
    started = time.monotonic()
    await asyncio.wait_for(slots.wait(0.1), 1)  # the slot going idle next keeps it now
    assert time.monotonic() - started < 0.5
    assert not other.done()
    other.cancel()
    await asyncio.gather(other, return_exceptions=True)
