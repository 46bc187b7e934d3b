"""Fresh planner statistics after bulk writes.

Right after a bank's first thousands of facts arrive, PostgreSQL still believes the tables are nearly
empty (autovacuum analyses them up to a minute later), and recall's joins get planned as nested loops
over the whole bank: queries that take milliseconds took a second. A retain that leaves memory_units
with many rows changed since the last ANALYZE (autovacuum's own rule: 50 + 10 % of the rows) analyses
the tables recall reads, once at a time across the server. Only retains of BULK_RETAIN_FACTS facts or
more check, so a small retain pays no extra round trips; a stream of small ones is autovacuum's.

The same job vacuums keyword_postings and unit_entities, which recall reads by index-only scans: those
skip the table only on pages its visibility map marks all-visible, and only a VACUUM marks them. Never
vacuumed, a bank's first 10,000 facts had the keyword arm at 25 ms instead of 2.2 ms (unanalysed:
planned as an empty table; unvacuumed: every posting fetched from the table), and the graph arm
fetched a table row for each entity of every fact it reached. It reads only the pages written since
the last one.

It also compacts the retained bank's per-word counts (`keyword_frequencies.compact_if_piled_up`) and vacuums
them. Every write statement appends delta rows, which a bulk ingest piles up unread (375,000 rows by
100,000 facts, where the bank's sums are 248 rows); the first recall then compacted them, and until
autovacuum came by, each recall's reads of the counts visited the deleted rows' ~3,000 pages through
bitmap scans (which never mark an index entry dead): 6.4 ms of PostgreSQL's time a recall. Compacted
before the ANALYZE starts, the deleted rows are older than every snapshot the job's statements take,
so the VACUUM after it removes them (those a concurrent writer's snapshot still sees, the next job).

A bulk retain's caller waits for the job, and PostgreSQL alone works meanwhile: memory_units is
analysed on the job's connection while a second one does the other tables and the VACUUM, so the job
takes the longer of the two instead of their sum.

Those rules see the tables, not a bank. A bank that grows by small retains in a table of others may
stay unknown to the planner (no count of its own in the statistics, so about one row expected) until
a tenth of the whole table changes; plans that look rows up one by one then read the whole bank for
each (recall at 3,000 facts took 216 ms instead of 31 before its statements were written not to). So
after a small retain, now and then (`analyze_soon_if_bank_undercounted`), the bank's count is
compared with the planner's estimate, and the tables are analysed in the background when the bank
holds several times more facts than it believes."""

from __future__ import annotations

import json
import logging
import time
from typing import get_args

import asyncpg

from engram.background import in_background
from engram.store.keyword_frequencies import compact_if_piled_up, facts_of_types
from engram.store.spare import spare_connection, together_then_release
from engram.types.memory import FactType

log = logging.getLogger("engram.store")

ANALYZED_TABLES = ("memory_units", "memory_unit_sentences", "memory_links", "unit_entities", "entities",
                   "keyword_postings")
# The largest table alone on one connection, the others on the second: at 5,000 facts ~30 ms against
# ~55, at 100,000 ~500 against ~250.
ALONE_TABLE = "memory_units"
VACUUMED_TABLES = ("keyword_postings", "unit_entities", "keyword_frequencies")
BASE_THRESHOLD = 50
BULK_RETAIN_FACTS = 50
SCALE_FACTOR = 0.1
_LOCK_KEY = 0x656E6772616D  # pg_try_advisory_lock key of this job ("engram")


async def publish_write_counts(conn: asyncpg.Connection) -> None:
    """Make this transaction's row counts visible to other sessions as soon as it commits (they are
    otherwise published up to a second later, too late for `analyze_if_stale` right after)."""
    if conn.get_server_version().major < 15:  # no such function; the counts just arrive later
        return
    # Checked first: a denied call would abort the caller's transaction (the function may be revoked
    # from PUBLIC on a server Engram does not own).
    if await conn.fetchval("SELECT has_function_privilege('pg_stat_force_next_flush()', 'EXECUTE')"):
        await conn.execute("SELECT pg_stat_force_next_flush()")


async def analyze_if_stale(pool: asyncpg.Pool, bank_id: str | None = None) -> bool:
    """ANALYZE the recall tables (and VACUUM the VACUUMED_TABLES) when memory_units changed enough since
    the last analysis; returns whether it ran (False too when another connection is already
    analysing). `bank_id`: the bank just written, whose per-word counts are compacted first."""
    async with pool.acquire() as conn:
        stale = await conn.fetchval(
            # $2 typed: inferred from the bigint beside it, 0.1 was sent as 0 and every bulk retain
            # re-analysed the tables (~0.8 s at 100,000 facts, a sixth of the ingest).
            "SELECT n_mod_since_analyze > $1 + $2::float8 * greatest(n_live_tup, reltuples::bigint)"
            " FROM pg_stat_user_tables JOIN pg_class ON pg_class.oid = relid WHERE relid = 'memory_units'::regclass",
            BASE_THRESHOLD, SCALE_FACTOR,
        )
        return bool(stale) and await _refresh_unless_under_way(pool, conn, bank_id)


async def _refresh_unless_under_way(pool: asyncpg.Pool, conn: asyncpg.Connection, bank_id: str | None) -> bool:
    """`_refresh` under the job's lock, or nothing (False) when another connection holds it."""
    if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _LOCK_KEY):
        return False
    try:
        if bank_id is not None:
            await compact_if_piled_up(conn, bank_id)
        await _refresh(pool, conn)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return True


async def _refresh(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    """The ANALYZE and VACUUM, on `conn` and a second connection at once when the pool has one idle."""
    other = await spare_connection(pool)
    if other is None:
        await conn.execute(f"ANALYZE {ALONE_TABLE}")
        await _analyze_others_and_vacuum(conn)
        return
    await together_then_release(pool, other, conn.execute(f"ANALYZE {ALONE_TABLE}"), _analyze_others_and_vacuum(other))


async def _analyze_others_and_vacuum(conn: asyncpg.Connection) -> None:
    await conn.execute(f"ANALYZE {', '.join(t for t in ANALYZED_TABLES if t != ALONE_TABLE)}")
    # SKIP_LOCKED: autovacuum may be at it already.
    await conn.execute(f"VACUUM (SKIP_LOCKED) {', '.join(VACUUMED_TABLES)}")


# A bank whose facts outnumber the planner's estimate of its rows this many times over (and that has
# at least UNDERCOUNT_MIN_FACTS: below it a wrong plan costs little) gets the tables analysed, at most
# once a UNDERCOUNT_CHECK_INTERVAL_S per bank in a process, and again only once it has grown that
# many times over since (after an ANALYZE a bank outside the statistics' most common values is still
# estimated at an average bank).
UNDERCOUNT_FACTOR = 4
UNDERCOUNT_MIN_FACTS = 500
UNDERCOUNT_CHECK_INTERVAL_S = 30.0
_next_check: dict[str, float] = {}
_facts_when_analysed: dict[str, int] = {}


async def planned_rows(conn: asyncpg.Connection, bank_id: str) -> float:
    """The rows of the bank's facts PostgreSQL's statistics lead it to expect."""
    plan = await conn.fetchval("EXPLAIN (FORMAT JSON) SELECT 1 FROM memory_units WHERE bank_id = $1", bank_id)
    return float((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])


async def analyze_if_bank_undercounted(pool: asyncpg.Pool, bank_id: str) -> bool:
    """ANALYZE the recall tables (see the module's docstring) when the planner undercounts the bank;
    returns whether it ran."""
    async with pool.acquire() as conn:
        facts, _ = await facts_of_types(conn, bank_id, list(get_args(FactType)))
        if facts < UNDERCOUNT_MIN_FACTS or facts <= UNDERCOUNT_FACTOR * _facts_when_analysed.get(bank_id, 0):
            return False
        if facts <= UNDERCOUNT_FACTOR * await planned_rows(conn, bank_id):
            return False
        if not await _refresh_unless_under_way(pool, conn, bank_id):
            return False
    _facts_when_analysed[bank_id] = facts
    log.info("bank %s: %d facts where the planner expected far fewer; tables analysed", bank_id, facts)
    return True


def analyze_soon_if_bank_undercounted(pool: asyncpg.Pool, bank_id: str) -> None:
    """`analyze_if_bank_undercounted` in the background (the retain does not wait), at most once a
    UNDERCOUNT_CHECK_INTERVAL_S per bank."""
    now = time.monotonic()
    if _next_check.get(bank_id, 0.0) > now:
        return
    _next_check[bank_id] = now + UNDERCOUNT_CHECK_INTERVAL_S
    in_background(lambda: analyze_if_bank_undercounted(pool, bank_id), f"analyze for {bank_id}",
                  f"checking the planner's statistics for bank {bank_id} failed")
