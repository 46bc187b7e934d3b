"""A bulk retain's semantic links, searched beside its transaction.

Every new fact is linked to its `per_unit` nearest facts of the bank at least `min_similarity` alike
(`facts_write.insert_semantic_links`). Inside the retain's transaction that search ran on the one
connection, after the facts, entities and temporal links, while the server waited: at 100,000 facts
it was ~0.9 ms of a bulk item's ~3.6 ms of PostgreSQL time, on one core of two. Here a bulk retain
splits it:

- up to two other connections of the pool choose each new fact's best `per_unit` targets, while the
  transaction stores the entities and temporal links: among the facts already committed (read from
  the table) and among the retain's other new facts (sent with the query as vectors: only the
  transaction sees them in the table);
- then one statement of the transaction inserts them, but for targets deleted meanwhile.

The candidates travel as one text value per side connection, so the ~45 links a fact never become
Python objects (a first version that merged them in Python cost 0.4-0.8 ms more server CPU a fact),
and the batch's own similarities are not computed with numpy: its multithreaded BLAS spins its threads
after each product, ~100 ms of CPU a bulk call. Choosing the best of both kinds on the side
connections, not in the transaction's statement, took ~0.1 s of 500 items' ~0.4 s off the
transaction at 100,000 facts (session 16).

The links are the ones the transaction's own search finds (it sees the committed facts and its
own), up to the approximation of the HNSW index. When the pool has no connection to spare at once,
the search runs inside the transaction as before, so a retain never waits on the pool it already
holds a connection of; so does a retain of more than `SIDE_SEARCH_MAX_FACTS` new facts, whose
pairs the side connections would take too long to compare.

On copies of a 100,000-fact bank, 5,000 more items in bulk went from 194-200 to 214-219 items/s
for ~1 % more CPU an item; at 1,000-5,000 facts, where the search is cheap, the rate stayed within
1-3 % (bench/README.md, session 15).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

import asyncpg

from engram.store import facts_write as fw
from engram.store.pool import encode_vector
from engram.store.spare import results_or_first_failure
from engram.store.vector_index import indexed_distance

log = logging.getLogger("engram.store")

SIDE_CONNECTIONS = 2
SIDE_ACQUIRE_TIMEOUT_S = 0.05
# Beyond this many new facts the search stays in the transaction, through the index, which sees them:
# the side connections compare every new fact with every other (they cannot read them from the
# table), and for the ~33,000 facts of one 2 MB document that ran past the pool's 300 s statement
# timeout (a 500-item call, the usual bulk, compares 250,000 pairs; 2,000 facts, 4 million).
SIDE_SEARCH_MAX_FACTS = 2_000

# Each vector ($2, numbered from $5 + 1) with its best $4 candidates at least $3 alike, as one text value
# 'position id similarity,...': the committed facts of bank $1 (`{candidates}`: read once, exactly, or
# through the HNSW index) and the retain's other new facts (all of them: ids $6, vectors $7, which
# this connection cannot read from the table). Ties go to the smaller id.
_BEST_CANDIDATES = """
    {with_clause} batch AS MATERIALIZED (SELECT * FROM unnest($6::uuid[], $7::vector[]) AS b(id, vec))
    SELECT coalesce(string_agg(concat_ws(' ', $5 + q.i, near.id, near.similarity), ','), '')
    FROM unnest($2::vector[]) WITH ORDINALITY AS q(vec, i)
    CROSS JOIN LATERAL (
        SELECT c.id, c.similarity
        FROM (
            (SELECT o.id, 1 - (o.embedding <=> q.vec) AS similarity
             FROM {candidates}
             ORDER BY {distance}{order}
             LIMIT $4)
            UNION ALL
            SELECT b.id, 1 - (b.vec <=> q.vec) FROM batch b WHERE b.id <> ($6::uuid[])[$5 + q.i]
        ) c
        WHERE c.similarity >= $3
        ORDER BY c.similarity DESC, c.id
        LIMIT $4
    ) near
"""


async def link_bulk(
    conn: asyncpg.Connection, pool: asyncpg.Pool | None, bank_id: str, ids: list[uuid.UUID],
    vectors: list[Any], meanwhile: Awaitable[None], *, min_similarity: float = 0.7, per_unit: int = 50,
) -> None:
    """Insert the semantic links of the new facts `ids` (their `vectors` in the same order) on `conn`,
    the retain's transaction, after `meanwhile` (the transaction's other work) has run on it."""
    exact = await fw.semantic_search_is_exact(conn, bank_id)  # counted with the transaction's new facts
    sides = await _acquire_sides(pool, min(SIDE_CONNECTIONS, len(ids))) if len(ids) <= SIDE_SEARCH_MAX_FACTS else []
    if not sides:
        await meanwhile
        await fw.insert_semantic_links(conn, bank_id, ids, min_similarity=min_similarity, per_unit=per_unit,
                                       exact=exact)
        return
    try:
        encoded = [encode_vector(v) for v in vectors]
        share = -(-len(ids) // len(sides))  # each side connection's consecutive run of the facts
        # Every search ends before its connection goes back to the pool, even when another failed:
        # released while its statement ran, a connection failed the retain with an InterfaceError.
        search = asyncio.ensure_future(asyncio.gather(*(
            best_candidates(side, bank_id, ids, encoded, first, share,
                            exact=exact, min_similarity=min_similarity, per_unit=per_unit)
            for side, first in zip(sides, range(0, len(ids), share), strict=False)
        ), return_exceptions=True))
        try:
            await meanwhile
        except BaseException:
            search.cancel()  # and wait for it: its connections go back to the pool below
            with contextlib.suppress(BaseException):
                await search
            raise
        found = await search
    finally:
        for side in sides:
            await pool.release(side)
    stored = results_or_first_failure(found)
    log.debug("semantic links of %d facts searched beside the transaction on %d connections", len(ids), len(sides))
    await insert_found(conn, bank_id, ids, stored)


async def _acquire_sides(pool: asyncpg.Pool | None, wanted: int) -> list[asyncpg.Connection]:
    """Up to `wanted` connections the pool can give at once (none when it has no spare one)."""
    sides: list[asyncpg.Connection] = []
    if pool is None:
        return sides
    for _ in range(wanted):
        try:
            sides.append(await pool.acquire(timeout=SIDE_ACQUIRE_TIMEOUT_S))
        except TimeoutError:
            break
    return sides


async def best_candidates(
    conn: asyncpg.Connection, bank_id: str, ids: list[uuid.UUID], vectors: list[bytes], first: int, count: int, *,
    exact: bool, min_similarity: float, per_unit: int,
) -> str:
    """The best `per_unit` link targets at least `min_similarity` alike of the new facts `ids[first:first +
    count]`, among the committed facts of the bank and all the new facts (`ids`, their `vectors`), as
    'position id similarity' entries joined by commas (positions in `ids`, from 1); the committed
    facts searched exactly, or through the HNSW index as `facts_write.insert_semantic_links` searches."""
    mine = vectors[first:first + count]
    if not mine:
        return ""
    values = (bank_id, mine, min_similarity, per_unit, first, ids, vectors)
    async with conn.transaction(readonly=True):
        if exact:
            return await conn.fetchval(_BEST_CANDIDATES.format(
                with_clause=fw.BANK_FACTS + ",", candidates="bank_facts o", distance="o.embedding <=> q.vec",
                order=", o.id"), *values)
        await conn.execute(fw.hnsw_link_settings(per_unit))
        return await conn.fetchval(_BEST_CANDIDATES.format(
            with_clause="WITH", candidates=fw.INDEXED_FACTS, distance=indexed_distance("o.embedding", "q.vec"),
            order=""), *values)


# The new facts' ($2) links the side connections chose ($3: their text values), but for a target
# deleted since (by another transaction that has committed since), which would fail the retain on the
# links' check of their facts (migration 027). Inserted in (from, to) order, the order of memory_links'
# primary key.
_INSERT_FOUND = """
    INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
    SELECT found.f, found.t, $1, 'semantic', found.w
    FROM (
        SELECT ($2::uuid[])[split_part(e, ' ', 1)::int] AS f, split_part(e, ' ', 2)::uuid AS t,
               split_part(e, ' ', 3)::float8 AS w
        FROM unnest($3::text[]) AS side(text), unnest(string_to_array(side.text, ',')) AS e
    ) found
    WHERE EXISTS (SELECT 1 FROM memory_units m WHERE m.id = found.t)
    ORDER BY found.f, found.t
    ON CONFLICT DO NOTHING
"""


async def insert_found(conn: asyncpg.Connection, bank_id: str, ids: list[uuid.UUID], found: list[str]) -> None:
    """Insert the links `best_candidates` found for the new facts `ids` (its text values)."""
    await conn.execute(_INSERT_FOUND, bank_id, ids, [text for text in found if text])
