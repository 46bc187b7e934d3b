"""Filling a token budget in rank order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from engram.models.tokens import count_tokens_batch

T = TypeVar("T")


def fill_budget(items: Sequence[T], texts: Sequence[str], max_tokens: int) -> tuple[list[T], int]:
    """The longest prefix of `items` whose texts fit in `max_tokens`, and the tokens it uses."""
    kept: list[T] = []
    used = 0
    for item, tokens in zip(items, count_tokens_batch(list(texts)), strict=False):
        if used + tokens > max_tokens:
            break
        kept.append(item)
        used += tokens
    return kept, used
