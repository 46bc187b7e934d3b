"""Reads the per-word fact counts of migration 022 and compacts their delta rows.

Every statement that adds or removes facts appends rows (one per bank, fact type and word it touched),
so a word's count is a sum over a number of rows that grows with the number of writes. Recall notices
when its scope's totals (which every write adds a row to) took many rows to sum and compacts the bank
in the background: the rows are deleted and their sums written back in one statement, which
concurrent writers (who only ever insert) never wait on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import get_args

import asyncpg

from engram.background import in_background, running
from engram.types.memory import FactType

log = logging.getLogger("engram.store")

# A recall that summed more delta rows than this for its scope's totals compacts the bank.
COMPACT_AFTER_ROWS = 32
TOTALS = ""  # the lexeme of a fact type's totals row


@dataclass(frozen=True)
class WordCount:
    """A lexeme's facts in scope, and what bounds its term frequency factor: the most positions it has
    in one fact (None: unknown) and the fewest lexemes of a fact holding it."""

    facts: int
    max_occurrences: int | None
    min_length: int | None


@dataclass(frozen=True)
class ScopeWords:
    """What a keyword search needs to know about its scope: the valid facts of the fact types, their
    summed lengths (in lexemes), and the count of each query lexeme the scope holds."""

    facts: int
    total_length: int
    words: dict[str, WordCount]


async def read_scope_words(conn: asyncpg.Connection, bank_id: str, fact_types: list[str], query: str) -> ScopeWords:
    """The counts of the query's lexemes (PostgreSQL's English stemming) among the bank's valid facts
    of `fact_types`."""
    rows = await conn.fetch(
        """
        SELECT lexeme, sum(facts)::bigint AS facts, sum(length)::bigint AS length,
               max(max_occurrences) AS max_occurrences, min(min_length) AS min_length
        FROM keyword_frequencies
        WHERE bank_id = $1 AND fact_type = ANY($2::text[])
          AND lexeme = ANY(array_append(tsvector_to_array(to_tsvector('english', $3)), ''))
        GROUP BY lexeme
        """,
        bank_id, fact_types, query,
    )
    facts = total_length = 0
    words: dict[str, WordCount] = {}
    for row in rows:
        if row["lexeme"] == TOTALS:
            facts, total_length = int(row["facts"]), int(row["length"])
        elif row["facts"] > 0:
            words[row["lexeme"]] = WordCount(int(row["facts"]), row["max_occurrences"], row["min_length"])
    return ScopeWords(facts, total_length, words)


async def facts_of_types(
    conn: asyncpg.Connection | asyncpg.Pool, bank_id: str, fact_types: list[str]
) -> tuple[int, int]:
    """(the bank's valid facts of these types, the delta rows that took to sum)."""
    row = await conn.fetchrow(
        "SELECT coalesce(sum(facts), 0)::bigint AS facts, count(*) AS row_count FROM keyword_frequencies"
        " WHERE bank_id = $1 AND lexeme = '' AND fact_type = ANY($2::text[])",
        bank_id, fact_types,
    )
    return int(row["facts"]), int(row["row_count"])


async def compact(pool: asyncpg.Pool, bank_id: str) -> int:
    """Replace the bank's delta rows by one row per (fact type, word); returns the rows written (-1 when
    another connection is compacting the bank)."""
    async with pool.acquire() as conn:
        return await compact_on(conn, bank_id)


async def compact_on(conn: asyncpg.Connection, bank_id: str) -> int:
    """`compact` on `conn`, in a transaction of its own (`conn` must not be in one)."""
    async with conn.transaction():
        if not await conn.fetchval(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('keyword_frequencies ' || $1, 0))", bank_id
        ):
            return -1
        status = await conn.execute(
            """
            WITH gone AS (DELETE FROM keyword_frequencies WHERE bank_id = $1 RETURNING *)
            INSERT INTO keyword_frequencies
            SELECT bank_id, fact_type, lexeme, sum(facts), sum(length), max(max_occurrences), min(min_length)
            FROM gone GROUP BY bank_id, fact_type, lexeme
            HAVING sum(facts) <> 0
            """,
            bank_id,
        )
    return int(status.split()[-1])


async def compact_if_piled_up(conn: asyncpg.Connection, bank_id: str) -> None:
    """Compact the bank's counts on `conn` when its totals take more than COMPACT_AFTER_ROWS rows to sum
    (the rule a recall follows), for a caller that has just written many facts. A failure is logged,
    not raised: the caller's write is committed, and uncompacted counts are still exact (the next
    recall or bulk retain compacts them)."""
    _, rows = await facts_of_types(conn, bank_id, list(get_args(FactType)))
    if rows > COMPACT_AFTER_ROWS:
        try:
            await compact_on(conn, bank_id)
        except asyncpg.PostgresError as exc:
            log.warning("compacting the keyword frequencies of bank %s failed: %s", bank_id, exc)


def compact_soon(pool: asyncpg.Pool, bank_id: str) -> None:
    """Compact the bank in the background (a recall does not wait for it); one task per bank at a time.
    A failed compaction leaves correct (only longer) sums; the next lookup retries."""
    name = f"compact {bank_id}"
    if not running(name):
        in_background(lambda: compact(pool, bank_id), name,
                      f"compacting the keyword frequencies of bank {bank_id} failed")
