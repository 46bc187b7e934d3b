"""Work no one waits on gives way to the requests someone waits on (engram.give_way): a bulk retain's
steps wait while a recall or a one-chunk retain's write is under way, at most GIVE_WAY_MAX_S a step."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engram import Memory, cpu_priority, give_way
from engram.give_way import waited_on
from engram.recall import pipeline


async def hold_mark(seconds: float) -> float:
    """A request someone waits on, under way for `seconds`; when it ended (monotonic)."""
    with waited_on():
        await asyncio.sleep(seconds)
    return time.monotonic()


async def low_priority_step(done: list[str]) -> None:
    with cpu_priority.low_priority():
        await give_way.give_way()
        done.append("low-priority step")


async def test_a_low_priority_step_waits_for_the_marked_request_to_end() -> None:
    done: list[str] = []
    marked = asyncio.create_task(hold_mark(0.02))
    await asyncio.sleep(0)
    await low_priority_step(done)
    assert marked.done(), "the step went on once the request had ended"
    assert done == ["low-priority step"]


async def test_a_low_priority_step_waits_at_most_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(give_way, "GIVE_WAY_MAX_S", 0.01)
    marked = asyncio.create_task(hold_mark(2.0))
    await asyncio.sleep(0)
    started = time.monotonic()
    await low_priority_step([])
    assert time.monotonic() - started < 1.0 and not marked.done(), "a long request slows the step, never stops it"
    await marked


async def test_normal_priority_never_waits_and_low_priority_requests_mark_nothing() -> None:
    marked = asyncio.create_task(hold_mark(1.0))
    await asyncio.sleep(0)
    started = time.monotonic()
    await give_way.give_way()  # not at low priority
    assert time.monotonic() - started < 0.5
    await marked
    with cpu_priority.low_priority(), waited_on():  # a consolidation's recall, say
        assert give_way._this_loop().marked == 0


async def test_a_recall_is_marked_while_it_runs(isolated_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    fetch = pipeline.fetch_candidates

    async def fetch_noting_the_mark(*args: Any, **kwargs: Any) -> Any:
        seen.append(give_way._this_loop().marked)
        return await fetch(*args, **kwargs)

    monkeypatch.setattr(pipeline, "fetch_candidates", fetch_noting_the_mark)
    with Memory(database_url=isolated_dsn) as memory:
        memory.retain("marks", "Ada keeps bees on the roof of the mill.")
        assert memory.recall("marks", "Who keeps bees?").results
    assert seen == [1]


def test_a_bulk_retain_writes_once_the_marked_request_ends_and_a_one_item_retain_does_not_wait(
    isolated_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(give_way, "GIVE_WAY_MAX_S", 30.0)  # so the wait ends when the request does
    with Memory(database_url=isolated_dsn) as memory:
        memory.retain("bulk", "Warm-up: the store opens and the model loads before the marks.")
        marked = memory._submit(hold_mark(3.0))  # on the library's event loop, as a recall would be
        time.sleep(0.1)
        memory.retain("bulk", "Omar repairs bicycles in the shed.")  # one chunk: someone waits on it
        assert not marked.done(), "a one-item retain does not give way"
        memory.retain_batch("bulk", [{"content": "Greta paints the harbour wall."},
                                     {"content": "Hugo rows to the island at dawn."}])  # two chunks: bulk
        written = time.monotonic()
        assert marked.done() and written >= marked.result(), "the bulk retain wrote after the request ended"
        assert any("Hugo" in r.text for r in memory.recall("bulk", "Who rows to the island?").results)


TEXTS = ["Ada keeps bees on the roof of the mill.", "Omar repairs bicycles in the shed."]


@pytest.fixture
def warm_model() -> Any:
    """The embedder, loaded and warm before a test marks a request."""
    from engram.models.embedder import embedder

    model = embedder()
    model.embed(TEXTS)
    return model


async def test_the_models_runs_for_low_priority_work_wait_for_the_marked_request(
    monkeypatch: pytest.MonkeyPatch, warm_model: Any,
) -> None:
    monkeypatch.setattr(give_way, "GIVE_WAY_MAX_S", 30.0)  # so the wait ends when the request does
    marked = asyncio.create_task(hold_mark(0.5))
    await asyncio.sleep(0)
    with cpu_priority.low_priority():  # a bulk retain's facts, on the embedder's low-priority threads
        vectors = await cpu_priority.to_thread(warm_model.embed, TEXTS)
    assert marked.done() and time.monotonic() >= marked.result(), "the model ran once the request had ended"
    assert vectors.shape == (2, 384)


async def test_the_models_runs_wait_at_most_the_limit_and_never_at_normal_priority(
    monkeypatch: pytest.MonkeyPatch, warm_model: Any,
) -> None:
    monkeypatch.setattr(give_way, "GIVE_WAY_MAX_S", 0.01)
    marked = asyncio.create_task(hold_mark(3.0))
    await asyncio.sleep(0)
    with cpu_priority.low_priority():
        await cpu_priority.to_thread(warm_model.embed, TEXTS)
    assert not marked.done(), "a long request slows the low-priority runs, never stops them"
    monkeypatch.setattr(give_way, "GIVE_WAY_MAX_S", 30.0)
    await asyncio.to_thread(warm_model.embed, TEXTS)  # a recall's or a one-item retain's: normal priority
    assert not marked.done(), "a run at normal priority does not wait for the request"
    await marked
