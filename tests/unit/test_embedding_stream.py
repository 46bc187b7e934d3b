"""`EmbeddingStream`: facts handed over while others are being embedded are all embedded, in order,
batched by arrival (at most MAX_BATCH a run; once closed, runs of half of what is left, so the last is
short) and handed to the writer batch by batch; a failure reaches `finish()` and `embedded()`;
`cancel()` stops it."""

from __future__ import annotations

import asyncio

import pytest

from engram.retain.embedding import MAX_BATCH, TAIL_BATCH, EmbeddingStream


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


class Gate:
    """Embeds a batch only when the test lets it: `allow()` releases the next batch."""

    def __init__(self, fail_on: object = None) -> None:
        self.batches: list[list[object]] = []
        self.fail_on = fail_on
        self.gates: asyncio.Queue[None] = asyncio.Queue()

    def allow(self) -> None:
        self.gates.put_nowait(None)

    async def __call__(self, batch: list[object]) -> None:
        await self.gates.get()
        self.batches.append(list(batch))
        if self.fail_on in batch:
            raise RuntimeError(f"cannot embed {self.fail_on}")


async def test_the_writer_gets_each_batch_as_soon_as_it_is_embedded_at_most_max_batch_at_a_time() -> None:
    gate = Gate()
    stream = EmbeddingStream(gate)
    stream.add(list(range(MAX_BATCH + 3)))
    batches = stream.embedded()
    gate.allow()
    first = await asyncio.wait_for(anext(batches), 5)
    assert first == list(range(MAX_BATCH)), "the first batch is handed over before the rest is embedded"
    assert len(gate.batches) == 1
    stream.close()
    gate.allow()
    assert await asyncio.wait_for(anext(batches), 5) == list(range(MAX_BATCH, MAX_BATCH + 3))
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(batches), 5)


async def test_once_closed_each_run_takes_half_of_what_is_left_so_the_last_one_is_short() -> None:
    """The writer stores a batch while the next one embeds, so what it stores after the model is done
    is the last batch alone: a short one."""
    gate = Gate()
    stream = EmbeddingStream(gate)
    stream.add(list(range(100)))
    stream.close()
    for _ in range(6):
        gate.allow()
    await asyncio.wait_for(stream.finish(), 5)
    assert [len(batch) for batch in gate.batches] == [MAX_BATCH, MAX_BATCH, 18, 9, 5, 4]
    assert len(gate.batches[-1]) <= TAIL_BATCH
    assert [fact for batch in gate.batches for fact in batch] == list(range(100))


async def test_a_failure_is_raised_by_embedded_after_the_batches_before_it() -> None:
    gate = Gate(fail_on=MAX_BATCH)
    stream = EmbeddingStream(gate)
    stream.add(list(range(MAX_BATCH + 1)))
    await asyncio.sleep(0)  # the first batch is taken while the stream is open: MAX_BATCH facts
    stream.close()
    gate.allow()
    gate.allow()
    received = []
    with pytest.raises(RuntimeError, match=f"cannot embed {MAX_BATCH}"):
        async for batch in stream.embedded():
            received.append(batch)
    assert received == [list(range(MAX_BATCH))]


async def test_the_writer_takes_facts_added_after_it_started_until_the_stream_is_closed() -> None:
    gate = Gate()
    stream = EmbeddingStream(gate)
    stream.add([1, 2])
    batches = stream.embedded()
    gate.allow()
    assert await asyncio.wait_for(anext(batches), 5) == [1, 2]
    stream.add([3])  # still open: the writer waits for more instead of ending
    gate.allow()
    assert await asyncio.wait_for(anext(batches), 5) == [3]
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.05)
    assert not waiting.done(), "an open stream does not end when its facts so far are embedded"
    stream.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 5)
