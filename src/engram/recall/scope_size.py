"""How many facts a recall's scope holds.

The semantic arm decides by it between exact distances and the HNSW index, and the keyword arm of a
tag-filtered scope takes it as BM25's N. A scope that is every valid fact of its types reads it from
the totals migration 022 keeps (exact and current, a few rows). A tag-filtered scope has to count:
an index-only scan over every fact in scope, ~8 ms at 16,000 facts under load, ten times that at
100,000, so its count is remembered for a few seconds. A count a few seconds old moves BM25's IDF by
the facts written since (the keyword arm never lets N fall below the facts it matched), and this
process forgets a bank's counts when it writes to it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg

from engram.recall.filters import UnitFilter
from engram.store import keyword_frequencies
from engram.store.sql import SqlParams

TTL_SECONDS = 5.0
MAX_ENTRIES = 4096

_counts: dict[tuple[Any, ...], tuple[float, int]] = {}


def _key(scope: UnitFilter) -> tuple[Any, ...]:
    groups = json.dumps([g.model_dump(by_alias=True) for g in scope.tag_groups or []], sort_keys=True)
    return (scope.bank_id, tuple(scope.fact_types), tuple(scope.tags or ()) if scope.tags is not None else None,
            scope.tags_match, groups)


async def facts_in_scope(pool: asyncpg.Pool, scope: UnitFilter) -> int:
    """The number of valid facts the scope sees; totals that took many rows to sum are compacted in the
    background."""
    if scope.sees_whole_fact_types():
        facts, rows = await keyword_frequencies.facts_of_types(pool, scope.bank_id, scope.fact_types)
        if rows > keyword_frequencies.COMPACT_AFTER_ROWS:
            keyword_frequencies.compact_soon(pool, scope.bank_id)
        return facts
    key = _key(scope)
    now = time.monotonic()
    cached = _counts.get(key)
    if cached is not None and now - cached[0] < TTL_SECONDS:
        return cached[1]
    params = SqlParams()
    count = await pool.fetchval(f"SELECT count(*) FROM memory_units m WHERE {scope.where(params)}", *params.values)
    if len(_counts) >= MAX_ENTRIES:
        _counts.clear()
    _counts[key] = (now, int(count))
    return int(count)


def forget_bank(bank_id: str) -> None:
    """Drop the bank's counts (after this process wrote to it)."""
    for key in [k for k in _counts if k[0] == bank_id]:
        del _counts[key]
