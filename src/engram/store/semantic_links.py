"""A bulk retain's semantic links, searched beside its transaction.

Every new fact is linked to its `per_unit` nearest facts of the bank at least `min_similarity` alike
(`facts_write.insert_semantic_links`). Inside the retain's transaction that search ran on the one
connection, after the facts, entities and temporal links, while the server waited: at 100,000 facts
it was ~0.9 ms of a bulk item's ~3.6 ms of PostgreSQL time, on one core of two. Here a bulk retain
splits it:

- the new facts' nearest facts among those already committed are searched on up to two other
  connections of the pool, while the transaction stores the entities and temporal links;
- then one statement of the transaction adds their nearest among each other (an exact search of the
  batch, which only the transaction sees), keeps each fact's best `per_unit` of both and inserts them.

The candidates travel as one text value per side connection, so the ~45 links a fact never become
Python objects (a first version that merged them in Python cost 0.4-0.8 ms more server CPU a fact),
and the batch's own similarities are not computed with numpy: its multithreaded BLAS spins its threads
after each product, ~100 ms of CPU a bulk call.

The links are the ones the transaction's own search finds (it sees the committed facts and its
own), up to the approximation of the HNSW index. When the pool has no connection to spare at once,
the search runs inside the transaction as before, so a retain never waits on the pool it already
holds a connection of. On copies of a 100,000-fact bank, 5,000 more items in bulk went from 194-200
to 214-219 items/s for ~1 % more CPU an item; at 1,000-5,000 facts, where the search is cheap, the
rate stayed within 1-3 % (bench/README.md, session 15).
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

log = logging.getLogger("engram.store")

SIDE_CONNECTIONS = 2
SIDE_ACQUIRE_TIMEOUT_S = 0.05

# Each vector ($2, numbered from $5 + 1) with its `per_unit` ($4) nearest committed facts of bank $1 at
# least $3 alike, as one text value: 'position id similarity,...'. `{candidates}`: the bank's facts,
# read once (exact) or through the HNSW index.
_NEAREST_STORED = """
    {with_clause}
    SELECT coalesce(string_agg(concat_ws(' ', $5 + q.i, near.id, near.similarity), ','), '')
    FROM unnest($2::vector[]) WITH ORDINALITY AS q(vec, i)
    CROSS JOIN LATERAL (
        SELECT o.id, 1 - (o.embedding <=> q.vec) AS similarity
        FROM {candidates}
        ORDER BY o.embedding <=> q.vec{order}
        LIMIT $4
    ) near
    WHERE near.similarity >= $3
"""


async def link_bulk(
    conn: asyncpg.Connection, pool: asyncpg.Pool | None, bank_id: str, ids: list[uuid.UUID],
    vectors: list[Any], meanwhile: Awaitable[None], *, min_similarity: float = 0.7, per_unit: int = 50,
) -> None:
    """Insert the semantic links of the new facts `ids` (their `vectors` in the same order) on `conn`,
    the retain's transaction, after `meanwhile` (the transaction's other work) has run on it."""
    exact = await fw.semantic_search_is_exact(conn, bank_id)  # counted with the transaction's new facts
    sides = await _acquire_sides(pool, min(SIDE_CONNECTIONS, len(ids)))
    if not sides:
        await meanwhile
        await fw.insert_semantic_links(conn, bank_id, ids, min_similarity=min_similarity, per_unit=per_unit,
                                       exact=exact)
        return
    try:
        encoded = [encode_vector(v) for v in vectors]
        share = -(-len(ids) // len(sides))  # each side connection's consecutive run of the facts
        search = asyncio.ensure_future(asyncio.gather(*(
            nearest_stored(side, bank_id, encoded[first:first + share], first,
                           exact=exact, min_similarity=min_similarity, per_unit=per_unit)
            for side, first in zip(sides, range(0, len(ids), share), strict=False)
        )))
        try:
            await meanwhile
        except BaseException:
            search.cancel()  # and wait for it: its connections go back to the pool below
            with contextlib.suppress(BaseException):
                await search
            raise
        stored = await search
    finally:
        for side in sides:
            await pool.release(side)
    log.debug("semantic links of %d facts searched beside the transaction on %d connections", len(ids), len(sides))
    await insert_best(conn, bank_id, ids, stored, min_similarity=min_similarity, per_unit=per_unit)


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


async def nearest_stored(
    conn: asyncpg.Connection, bank_id: str, vectors: list[bytes], first: int, *, exact: bool,
    min_similarity: float, per_unit: int,
) -> str:
    """Each vector's `per_unit` nearest committed facts of the bank at least `min_similarity` alike, as
    'position id similarity' entries joined by commas (positions from `first` + 1); exactly, or
    through the HNSW index as `facts_write.insert_semantic_links` searches it."""
    if not vectors:
        return ""
    values = (bank_id, vectors, min_similarity, per_unit, first)
    async with conn.transaction(readonly=True):
        if exact:
            return await conn.fetchval(_NEAREST_STORED.format(
                with_clause=fw.BANK_FACTS, candidates="bank_facts o", order=", o.id"), *values)
        await conn.execute(fw.hnsw_link_settings(per_unit))
        return await conn.fetchval(_NEAREST_STORED.format(
            with_clause="", order="", candidates=fw.INDEXED_FACTS), *values)


# The new facts ($2) linked to their best $4 candidates at least $5 alike: those the side connections
# found among the committed facts ($3: their text values) and those among each other, read here, where
# the transaction sees them. Never a fact to itself; a candidate found both ways once; nor one deleted
# since it was found (by another transaction that has committed since), which would fail the retain
# on the foreign key. Inserted in (from, to) order, the order of memory_links' primary key.
_INSERT_BEST = """
    WITH batch AS MATERIALIZED (SELECT id, embedding FROM memory_units WHERE id = ANY($2::uuid[]))
    INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
    SELECT f, t, $1, 'semantic', w
    FROM (
        SELECT f, t, w, row_number() OVER (PARTITION BY f ORDER BY w DESC, t) AS rank
        FROM (
            SELECT f, t, max(w) AS w
            FROM (
                SELECT ($2::uuid[])[split_part(e, ' ', 1)::int] AS f, split_part(e, ' ', 2)::uuid AS t,
                       split_part(e, ' ', 3)::float8 AS w
                FROM unnest($3::text[]) AS found(text), unnest(string_to_array(found.text, ',')) AS e
                UNION ALL
                SELECT pairs.f, pairs.t, pairs.w
                FROM (SELECT n.id AS f, o.id AS t, 1 - (o.embedding <=> n.embedding) AS w
                      FROM batch n CROSS JOIN batch o) pairs
                WHERE pairs.w >= $5
            ) candidates
            WHERE f <> t
            GROUP BY f, t
        ) distinct_candidates
    ) ranked
    WHERE rank <= $4 AND EXISTS (SELECT 1 FROM memory_units m WHERE m.id = ranked.t)
    ORDER BY f, t
    ON CONFLICT DO NOTHING
"""


async def insert_best(
    conn: asyncpg.Connection, bank_id: str, ids: list[uuid.UUID], stored: list[str], *, min_similarity: float,
    per_unit: int,
) -> None:
    """Insert each new fact's best `per_unit` links: of the committed facts `nearest_stored` found (its
    text values) and of the batch's other facts."""
    await conn.execute(_INSERT_BEST, bank_id, ids, [text for text in stored if text], per_unit, min_similarity)
