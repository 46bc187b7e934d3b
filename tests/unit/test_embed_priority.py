"""Background priority: only the thread that asks is lowered, the flag lasts for its block (or a background
stream's task), and background retains embed in slots of their own."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from engram.models.embed_priority import (
    BACKGROUND_NICE,
    background_embedding,
    embedding_in_background,
    lower_this_threads_priority,
)
from engram.retain.embedding import EmbeddingStream, _slots


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have nice values of their own on Linux")
def test_only_the_calling_thread_is_lowered() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}

    def background() -> None:
        lower_this_threads_priority()
        seen["lowered"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert seen["lowered"] == min(19, base + BACKGROUND_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base, "the caller's thread is untouched"


def test_the_flag_reaches_threads_started_inside_the_block_and_ends_with_it() -> None:
    async def main() -> tuple[bool, bool, bool]:
        with background_embedding():
            inside = await asyncio.to_thread(embedding_in_background)
            in_task = await asyncio.create_task(asyncio.to_thread(embedding_in_background))
        return inside, in_task, await asyncio.to_thread(embedding_in_background)

    assert asyncio.run(main()) == (True, True, False)
    assert not embedding_in_background()


def test_a_background_stream_embeds_in_the_background_and_leaves_its_maker_as_it_was() -> None:
    async def flags(background: bool) -> tuple[list[bool], bool]:
        seen: list[bool] = []

        async def embed(batch: list[object]) -> None:
            seen.append(embedding_in_background())

        stream = EmbeddingStream(embed, background=background)
        stream.add([1, 2])
        await stream.finish()
        return seen, embedding_in_background()

    assert asyncio.run(flags(True)) == ([True], False)
    assert asyncio.run(flags(False)) == ([False], False)


def test_a_foreground_retain_does_not_wait_for_the_slots_of_background_ones() -> None:
    async def foreground_gets_a_slot() -> bool:
        background = _slots(True)
        held = 0
        while not background.locked():  # every background slot taken by a bulk retain's batch
            await background.acquire()
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
                background.release()

    assert asyncio.run(foreground_gets_a_slot())
