"""Conversation neighbours in recall: a turn that only makes sense next to the one before or after it
("Got it last spring in Rome." after "I bought a Vespa") gets a share of its neighbours' fused score,
so the question about the Vespa finds where it was bought too. The reply to a turn that asks a
question gets a larger share: "What are your pets' names?" found, "Luna and Oliver!" is the answer.
Neighbours are the offline extractor's: the fact whose text continues this one's lead-in, or whose
lead-in is this fact."""

from __future__ import annotations

import uuid

import asyncpg

from engram.recall.filters import UnitFilter
from engram.store.sql import SqlParams

# Tuned on LoCoMo's dev split (bench/locomo_ablation.py); only the best candidates pass a share on, a
# fifth of theirs can lift nothing further down into the results. With one share of 0.1 for every
# neighbour R@10 was 79.3 %, with these 80.4 %; a reply's share of 0.3 or 0.5 gave 79.7 / 80.1 %.
NEIGHBOUR_SHARE = 0.2
REPLY_SHARE = 0.4
NEIGHBOUR_SOURCES = 100

# A fact's neighbours: (the neighbour, whether it is the reply to a question the fact asks).
Neighbours = dict[uuid.UUID, list[tuple[uuid.UUID, bool]]]


def neighbours_sql(params: SqlParams, scope: UnitFilter, unit_ids: list[uuid.UUID]) -> str:
    """A query of each fact's neighbours in its chunk (the fact before and the fact after), within the
    scope, as rows (unit, neighbour, reply): the fact after is a reply when this fact's own text (its
    part before " | ") holds a question mark. The candidates' fetch runs it (`rows.fetch_candidates`).

    The facts are read by their ids, then each one's neighbours among the facts of its chunk, and only
    then are the neighbours held to the scope: a lookup per fact whatever PostgreSQL's statistics say.
    With the scope's bank condition inside the lookup, the planner could read the neighbours through
    any of the bank's indexes, and where its statistics held no count for the bank (one grown by
    small retains since the table was last analysed) it expected one row there and read every fact of
    the bank for each of the hundred facts: 100-190 ms a recall at 3,000 facts, growing with the
    square of the bank, against ~1 ms."""
    ids = params.add(unit_ids)
    where = scope.where(params, alias="n")
    return f"""
        SELECT c.id AS unit, n.id AS neighbour, n.reply
        FROM memory_units c
        CROSS JOIN LATERAL (
            SELECT n.*,  -- the scope's columns below (PostgreSQL reads only those the query uses)
                   n.lead_in = split_part(c.text, ' | ', 1) AND strpos(split_part(c.text, ' | ', 1), '?') > 0
                       AS reply
            FROM memory_units n
            WHERE n.bank_id = c.bank_id AND n.document_id = c.document_id AND n.chunk_id = c.chunk_id
              AND n.id <> c.id
              AND (n.lead_in = split_part(c.text, ' | ', 1) OR c.lead_in = split_part(n.text, ' | ', 1))
            OFFSET 0  -- a lookup per fact: the scope's conditions below stay out of it
        ) n
        WHERE c.id = ANY({ids}::uuid[]) AND {where}
    """


async def fetch_neighbours(pool: asyncpg.Pool, scope: UnitFilter, unit_ids: list[uuid.UUID]) -> Neighbours:
    """`neighbours_sql` alone: each fact's neighbours (`bench/locomo_ablation.py` reads every fact's)."""
    params = SqlParams()
    rows = await pool.fetch(neighbours_sql(params, scope, unit_ids), *params.values) if unit_ids else []
    found: Neighbours = {}
    for row in rows:
        found.setdefault(row["unit"], []).append((row["neighbour"], bool(row["reply"])))
    return found


def share_with_neighbours(
    fused: dict[uuid.UUID, float], sources: list[uuid.UUID], neighbours: Neighbours
) -> dict[uuid.UUID, float]:
    """`fused` plus each source's score times NEIGHBOUR_SHARE (REPLY_SHARE for the reply to its
    question) added to each of its neighbours (which may be new candidates). A neighbour's shares are
    summed smallest first, so its sum does not depend on the order of the sources: the order of tied
    sources follows their ids, which differ between two ingests of the same data."""
    received: dict[uuid.UUID, list[float]] = {}
    for unit_id in sources:
        for neighbour, reply in neighbours.get(unit_id, []):
            share = REPLY_SHARE if reply else NEIGHBOUR_SHARE
            received.setdefault(neighbour, []).append(share * fused[unit_id])
    shared = dict(fused)
    for neighbour, shares in received.items():
        shared[neighbour] = shared.get(neighbour, 0.0) + sum(sorted(shares))
    return shared
