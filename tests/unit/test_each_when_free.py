"""`each_when_free`: steps spread on two connections, each taking the next step left once it is free;
results in the steps' order; after a failure no step starts, and the failure comes once both are idle.
(The connections are only handed to the steps: names stand for them here.)"""

from __future__ import annotations

import asyncio

import pytest

from engram.store.spare import each_when_free

Ran = list[tuple[str, str]]  # (step, connection), in the order the steps started


def step(name: str, seconds: float, ran: Ran, fails: bool = False):  # noqa: ANN201 - a step factory
    async def run(conn: str) -> str:
        ran.append((name, conn))
        await asyncio.sleep(seconds)
        if fails:
            raise ValueError(f"{name} failed")
        return f"{name} on {conn}"

    return run


async def test_the_connection_free_first_takes_the_next_step() -> None:
    ran: Ran = []
    results = await each_when_free("first", "second", [
        step("long", 0.05, ran), step("short", 0.0, ran), step("third", 0.0, ran), step("fourth", 0.0, ran)])

    assert results == ["long on first", "short on second", "third on second", "fourth on second"]
    assert ran[:2] == [("long", "first"), ("short", "second")]


async def test_a_long_second_step_leaves_the_rest_to_the_first_connection() -> None:
    ran: Ran = []
    results = await each_when_free("first", "second", [
        step("a", 0.0, ran), step("long", 0.05, ran), step("b", 0.0, ran)])

    assert results == ["a on first", "long on second", "b on first"]


async def test_after_a_failure_no_step_starts_and_the_failure_waits_for_the_step_still_running() -> None:
    ran: Ran = []
    ended: list[str] = []

    async def slow(conn: str) -> str:
        ran.append(("slow", conn))
        await asyncio.sleep(0.05)
        ended.append("slow")
        return "slow"

    with pytest.raises(ValueError, match="fails failed"):
        await each_when_free("first", "second", [step("fails", 0.0, ran, fails=True), slow, step("never", 0.0, ran)])

    assert ended == ["slow"], "the failure is raised once the other connection's step has ended"
    assert [name for name, _ in ran] == ["fails", "slow"]
