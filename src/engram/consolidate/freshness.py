"""How fresh the observations of a scope are: facts retained but not yet consolidated into them make
observation searches stale. Reflect reads this flag and verifies stale observations against the raw
facts; recall's trace shows it."""

from __future__ import annotations

from typing import Literal

import asyncpg

from engram.store.consolidation_status import waiting_facts
from engram.store.sql import SqlParams, tags_condition

Freshness = Literal["up_to_date", "slightly_stale", "stale"]
SLIGHTLY_STALE_MAX = 3


async def pending_facts(pool: asyncpg.Pool, bank_id: str, tags: list[str] | None, tags_match: str) -> int:
    params = SqlParams()
    condition = tags_condition(params, tags, tags_match)
    return await pool.fetchval(
        f"""
        SELECT count(*) FROM {waiting_facts(params.add(bank_id))} AND {condition}
        """,
        *params.values,
    )


def freshness_of(pending: int) -> Freshness:
    if pending == 0:
        return "up_to_date"
    return "slightly_stale" if pending <= SLIGHTLY_STALE_MAX else "stale"


async def observation_freshness(
    pool: asyncpg.Pool, bank_id: str, tags: list[str] | None = None, tags_match: str = "any"
) -> tuple[Freshness, int]:
    pending = await pending_facts(pool, bank_id, tags, tags_match)
    return freshness_of(pending), pending
