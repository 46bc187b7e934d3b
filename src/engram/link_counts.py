"""A bank's link counts for its stats, kept for a while when counting them is slow.

Counting links is the one part of a bank's stats that grows with its links (~50 a memory): at 100,000
memories, counting 5 million links by type and by their source fact's type took ~1 s of PostgreSQL on
every `GET …/stats`, MCP `get_bank_stats` and control-plane refresh. Hindsight 1.1.0 caches a bank's
whole stats for 60 s. Here only the link counts are kept, only for a bank whose count took at least
`slow_seconds`, for `keep_seconds`; everything else in the stats is exact on every call. A call with
`refresh` counts again, and clearing or deleting a bank forgets its counts (on this process: another
replica may show its kept counts until they expire).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from engram.store import banks as store
from engram.store.tx import Conn

LinkCountsByKind = dict[str, dict[str, int]]


@dataclass(frozen=True)
class _Kept:
    counted_at: float
    counts: LinkCountsByKind


class LinkCounts:
    def __init__(self, keep_seconds: float = 60.0, slow_seconds: float = 0.2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keep_seconds = keep_seconds
        self.slow_seconds = slow_seconds
        self._clock = clock
        self._kept: dict[str, _Kept] = {}

    async def of(self, conn: Conn, bank_id: str, *, refresh: bool = False) -> LinkCountsByKind:
        """`{"by_link": {link type: n}, "breakdown": {"fact type/link type": n}}` for the bank."""
        kept = self._kept.get(bank_id)
        if kept is not None and not refresh and self._clock() - kept.counted_at < self.keep_seconds:
            return kept.counts
        started = self._clock()
        counts = await store.bank_link_counts(conn, bank_id)
        if self._clock() - started >= self.slow_seconds and self.keep_seconds > 0:
            self._kept[bank_id] = _Kept(started, counts)
        else:
            self._kept.pop(bank_id, None)
        return counts

    def forget(self, bank_id: str) -> None:
        """The bank's links changed wholesale (cleared, deleted): count them again next time."""
        self._kept.pop(bank_id, None)
