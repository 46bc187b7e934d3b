"""`EmbeddingStream`: facts handed over while others are being embedded are all embedded, in order,
batched by arrival; a failure reaches `finish()`; `cancel()` stops it."""

from __future__ import annotations

import asyncio

import pytest

from engram.retain.embedding import EmbeddingStream


class Recorder:
    def __init__(self, fail_on: object = None) -> None:
        self.batches: list[list[object]] = []
        self.fail_on = fail_on
        self.release = asyncio.Event()

    async def __call__(self, batch: list[object]) -> None:
        self.batches.append(list(batch))
        if self.fail_on in batch:
            raise RuntimeError(f"cannot embed {self.fail_on}")
        await self.release.wait()


async def test_facts_added_while_a_batch_runs_make_the_next_batch() -> None:
    recorder = Recorder()
    stream = EmbeddingStream(recorder)
    stream.add([1])
    await asyncio.sleep(0)  # the first batch starts alone and waits
    stream.add([2, 3])
    stream.add([4])
    stream.add([])
    recorder.release.set()
    await stream.finish()
    assert recorder.batches == [[1], [2, 3, 4]]


async def test_a_failure_is_raised_by_finish() -> None:
    recorder = Recorder(fail_on=2)
    recorder.release.set()
    stream = EmbeddingStream(recorder)
    stream.add([1])
    await asyncio.sleep(0)
    stream.add([2])
    with pytest.raises(RuntimeError, match="cannot embed 2"):
        await stream.finish()


async def test_nothing_can_be_added_once_finished_and_cancel_stops_a_running_batch() -> None:
    recorder = Recorder()
    stream = EmbeddingStream(recorder)
    stream.add([1])
    await asyncio.sleep(0)
    await stream.cancel()  # the batch waits on `release` forever: cancel must not
    with pytest.raises(RuntimeError):
        stream.add([2])
    finished = EmbeddingStream(recorder)
    await finished.finish()
    assert recorder.batches == [[1]]
