"""`run_together`: results in order; the first failure, raised as it is, cancels the others."""

from __future__ import annotations

import asyncio

import pytest

from engram.errors import InvalidLLMOutput
from engram.together import run_together


def test_results_come_in_the_order_given() -> None:
    async def after(seconds: float, value: int) -> int:
        await asyncio.sleep(seconds)
        return value

    assert asyncio.run(run_together([after(0.03, 1), after(0.01, 2), after(0.02, 3)])) == [1, 2, 3]


def test_the_first_failure_is_raised_as_it_is_and_the_others_are_cancelled() -> None:
    ended: list[str] = []

    async def fail() -> None:
        await asyncio.sleep(0.01)
        raise InvalidLLMOutput("the model's answer")

    async def slow(name: str) -> None:
        try:
            await asyncio.sleep(5)
            ended.append(f"{name} finished")
        except asyncio.CancelledError:
            ended.append(f"{name} cancelled")
            raise

    async def run() -> list[str]:
        with pytest.raises(InvalidLLMOutput):
            await run_together([slow("a"), fail(), slow("b")])
        return sorted(ended)  # as the failure reached the caller

    assert asyncio.run(run()) == ["a cancelled", "b cancelled"]
