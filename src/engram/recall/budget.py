"""Filling a token budget in rank order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from engram.models.tokens import count_tokens_batch

T = TypeVar("T")
COUNT_CHUNK = 64


def fill_budget(
    items: Sequence[T], texts: Sequence[str], max_tokens: int, counts: Sequence[int | None] | None = None
) -> tuple[list[T], int]:
    """The longest prefix of `items` whose texts fit in `max_tokens`, and the tokens it uses.

    `counts` are token counts known in advance (stored at write time); the missing ones are counted
    here, a chunk at a time, only as far as the budget reaches."""
    known = list(counts) if counts is not None else [None] * len(items)
    kept: list[T] = []
    used = 0
    for start in range(0, len(items), COUNT_CHUNK):
        window = range(start, min(start + COUNT_CHUNK, len(items)))
        missing = [i for i in window if known[i] is None]
        for i, tokens in zip(missing, count_tokens_batch([texts[i] for i in missing])):
            known[i] = tokens
        for i in window:
            if used + known[i] > max_tokens:  # type: ignore[operator]
                return kept, used
            kept.append(items[i])
            used += known[i]  # type: ignore[operator]
    return kept, used
