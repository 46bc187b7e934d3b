"""Conversation neighbours in recall: a turn that only makes sense next to the one before or after it
("Got it last spring in Rome." after "I bought a Vespa") gets a share of its neighbours' fused score,
so the question about the Vespa finds where it was bought too. Neighbours are the offline
extractor's: the fact whose text continues this one's lead-in, or whose lead-in is this fact."""

from __future__ import annotations

import uuid

import asyncpg

from engram.recall.filters import UnitFilter
from engram.store.sql import SqlParams

# Tuned on LoCoMo's dev split (bench/locomo_ablation.py); only the best candidates pass a share on, a
# tenth of theirs can lift nothing further down into the results.
NEIGHBOUR_SHARE = 0.1
NEIGHBOUR_SOURCES = 100


async def fetch_neighbours(
    pool: asyncpg.Pool, scope: UnitFilter, unit_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Each fact's neighbours in its chunk (the fact before and the fact after), within the scope."""
    if not unit_ids:
        return {}
    params = SqlParams()
    ids = params.add(unit_ids)
    where = scope.where(params, alias="n")
    rows = await pool.fetch(
        f"""
        SELECT c.id AS unit, n.id AS neighbour
        FROM memory_units c JOIN memory_units n
          ON n.bank_id = c.bank_id AND n.document_id = c.document_id AND n.chunk_id = c.chunk_id
         AND n.id <> c.id
         AND (n.lead_in = split_part(c.text, ' | ', 1) OR c.lead_in = split_part(n.text, ' | ', 1))
        WHERE c.id = ANY({ids}::uuid[]) AND {where}
        ORDER BY c.id, n.id
        """,
        *params.values,
    )
    found: dict[uuid.UUID, list[uuid.UUID]] = {}
    for row in rows:
        found.setdefault(row["unit"], []).append(row["neighbour"])
    return found


def share_with_neighbours(
    fused: dict[uuid.UUID, float], sources: list[uuid.UUID], neighbours: dict[uuid.UUID, list[uuid.UUID]]
) -> dict[uuid.UUID, float]:
    """`fused` plus NEIGHBOUR_SHARE of each source's score added to each of its neighbours (which may
    be new candidates). Sources are taken in the order given, so the sums are always the same."""
    shared = dict(fused)
    for unit_id in sources:
        for neighbour in neighbours.get(unit_id, []):
            shared[neighbour] = shared.get(neighbour, 0.0) + NEIGHBOUR_SHARE * fused[unit_id]
    return shared
