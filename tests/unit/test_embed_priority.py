"""Background priority: only the thread that asks is lowered, and the flag lasts for its block."""

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
