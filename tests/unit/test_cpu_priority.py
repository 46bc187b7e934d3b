"""Low CPU priority: only the thread that asks is lowered; the flag lasts for its block and reaches the
tasks and threads started inside it; `to_thread` then runs on lowered threads; low-priority retains
embed in slots of their own."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from engram.cpu_priority import LOW_PRIORITY_NICE, at_low_priority, low_priority, lower_this_threads_priority, to_thread
from engram.retain.embedding import EmbeddingStream, _slots

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have nice values on Linux")


def this_threads_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux_only
def test_only_the_calling_thread_is_lowered() -> None:
    base = this_threads_nice()
    seen: dict[str, int] = {}

    def lowered() -> None:
        lower_this_threads_priority()
        seen["nice"] = this_threads_nice()

    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join()
    assert seen["nice"] == min(19, base + LOW_PRIORITY_NICE)
    assert this_threads_nice() == base, "the caller's thread is untouched"


@linux_only
def test_to_thread_runs_on_lowered_threads_only_at_low_priority() -> None:
    async def nice_values() -> tuple[int, int, int]:
        with low_priority():
            low = await to_thread(this_threads_nice)
        with low_priority(False):
            disabled = await to_thread(this_threads_nice)
        return low, disabled, await to_thread(this_threads_nice)

    base = this_threads_nice()
    assert asyncio.run(nice_values()) == (min(19, base + LOW_PRIORITY_NICE), base, base)


def test_the_flag_reaches_tasks_and_threads_started_inside_the_block_and_ends_with_it() -> None:
    async def main() -> tuple[bool, bool, bool, bool]:
        with low_priority():
            inside = await to_thread(at_low_priority)
            in_task = await asyncio.create_task(asyncio.to_thread(at_low_priority))
            task_started_inside = asyncio.create_task(asyncio.sleep(0, result=None))
        await task_started_inside
        return inside, in_task, at_low_priority(), await asyncio.to_thread(at_low_priority)

    assert asyncio.run(main()) == (True, True, False, False)
    assert not at_low_priority()


def test_a_stream_made_at_low_priority_embeds_at_low_priority() -> None:
    async def flags(low: bool) -> tuple[list[bool], bool]:
        seen: list[bool] = []

        async def embed(batch: list[object]) -> None:
            seen.append(at_low_priority())

        with low_priority(low):
            stream = EmbeddingStream(embed)
        stream.add([1, 2])
        await stream.finish()
        return seen, at_low_priority()

    assert asyncio.run(flags(True)) == ([True], False)
    assert asyncio.run(flags(False)) == ([False], False)


def test_a_waited_on_retain_does_not_wait_for_the_slots_of_low_priority_ones() -> None:
    async def foreground_gets_a_slot() -> bool:
        low = _slots(True)
        held = 0
        while not low.locked():  # every low-priority slot taken by a bulk retain's batch
            await low.acquire()
            held += 1
        try:
            foreground = _slots(False)
            await asyncio.wait_for(foreground.acquire(), 1.0)
            foreground.release()
            return True
        except TimeoutError:
            return False
        finally:
            for _ in range(held):
                low.release()

    assert asyncio.run(foreground_gets_a_slot())
