"""The facts' table cut in two halves by physical position, for the semantic arm's exact search.

Up to `arms.EXACT_SEARCH_MAX_FACTS` facts the semantic arm computes every distance, one fact after
the other, while the recall waits with little else running: at 5,000 facts that scan was ~7 ms on
one core of two (the vectors are 1.5 kB a fact). Cut at a page of the table, each half is a scan of
its own pages, and the two run at once on two connections (the arm's other part, the sentences'
vectors, takes little time in a bank with none). Each fact is in exactly one half, whatever the cut,
so the halves' best facts merged are the whole's; the cut only decides how evenly the work splits.

The cut is the table's middle page, read from PostgreSQL at most every `PAGES_TTL_SECONDS`: a table
that grew since only makes the second half longer. A bank's facts lie where its retains put them,
so in a table shared by many banks one half may hold more of a bank than the other."""

from __future__ import annotations

import time

import asyncpg

# Below this many facts in scope the scan is too short for a second statement to pay (at 1,000 facts
# ~1.3 ms whole).
HALVES_MIN_FACTS = 2_000
PAGES_TTL_SECONDS = 10.0

# A half's condition on a fact's `ctid`: (operator, (page, line)).
Half = tuple[str, tuple[int, int]]

_read_at: float | None = None
_pages = 0


async def middle_page(conn: asyncpg.Connection) -> int:
    """The facts' table's middle page, as of at most PAGES_TTL_SECONDS ago."""
    global _read_at, _pages
    now = time.monotonic()
    if _read_at is None or now - _read_at > PAGES_TTL_SECONDS:
        _pages = await conn.fetchval(
            "SELECT pg_relation_size('memory_units') / current_setting('block_size')::int")
        _read_at = now
    return _pages // 2


def halves(cut: int) -> tuple[Half, Half]:
    """The two halves' conditions on a fact's `ctid`, cut at page `cut`."""
    return ("<", (cut, 0)), (">=", (cut, 0))
