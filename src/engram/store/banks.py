"""Queries on `banks`: profiles, config overrides, listing, stats."""

from __future__ import annotations

from typing import Any

import asyncpg

from engram.store.bank_removals import Progress
from engram.store.memories import delete_bank_memories
from engram.store.missing_bank import MISSING_BANK
from engram.store.operations import fail_imports_into
from engram.store.sql import like_pattern
from engram.store.tx import Conn
from engram.store.writer_locks import writing_to_bank


async def get_bank(conn: Conn, bank_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM banks WHERE bank_id = $1", bank_id)


async def ensure_bank(conn: Conn, bank_id: str) -> None:
    """Create the bank with defaults if it does not exist (retain auto-creates banks)."""
    await conn.execute(MISSING_BANK.format(and_also=""), bank_id)


async def upsert_bank(
    conn: Conn,
    bank_id: str,
    *,
    name: str | None,
    mission: str | None,
    background: str | None,
    config_updates: dict[str, Any],
) -> asyncpg.Record:
    """Create or update a bank; only the values given (not None) change."""
    return await conn.fetchrow(
        """
        INSERT INTO banks (bank_id, name, mission, background, config)
        VALUES ($1, coalesce($2, $1), $3, $4, $5)
        ON CONFLICT (bank_id) DO UPDATE SET
            name = coalesce($2, banks.name),
            mission = coalesce($3, banks.mission),
            background = coalesce($4, banks.background),
            config = banks.config || $5,
            updated_at = now()
        RETURNING *
        """,
        bank_id,
        name,
        mission,
        background,
        config_updates,
    )


async def set_config_overrides(conn: Conn, bank_id: str, overrides: dict[str, Any]) -> None:
    await conn.execute(
        "UPDATE banks SET config = $2, updated_at = now() WHERE bank_id = $1", bank_id, overrides
    )


async def delete_bank(
    conn: Conn, bank_id: str, progress: Progress | None = None, *, import_wait: float | None = None,
) -> bool:
    """Delete the bank and everything in it, in one transaction. It goes alone among the bank's writes
    (`writing_to_bank`): begun beside retains, edits or clears of the bank, it deadlocked with them
    (its deletes and theirs took the same facts, entities and operations in other orders), and a retain
    that had looked for the bank before the delete committed failed on its documents' key. A retain
    waiting meanwhile runs after it, into the bank made again. While an import holds the bank, waits
    for it without a connection (`import_wait` seconds at most, then BankBusy). The bank's operations go
    with it; the unfinished imports into it filed under other banks are failed (`fail_imports_into`)."""
    async with writing_to_bank(conn, bank_id, import_wait, make_bank=False, undone="deleted") as tx:
        await tx.execute("DELETE FROM async_operations WHERE bank_id = $1", bank_id)
        # what the bank's cascade would remove row by row
        await delete_bank_memories(tx, bank_id, progress=progress)
        status = await tx.execute("DELETE FROM banks WHERE bank_id = $1", bank_id)
        if status.endswith(" 1"):
            await fail_imports_into(tx, bank_id)
        # Not a foreign key: the facts' delete trigger writes their negative counts, so a key's
        # cascade would have to run after it. Its trigger skips a deleted bank; the rows all go here.
        await tx.execute("DELETE FROM keyword_frequencies WHERE bank_id = $1", bank_id)
    return status.endswith(" 1")


async def list_banks(
    conn: Conn, *, q: str | None, limit: int, offset: int, only: list[str] | None = None
) -> tuple[list[asyncpg.Record], int]:
    """`only`: anchored regular expressions, one of which the bank id must match (an API key's banks)."""
    rows = await conn.fetch(
        """
        SELECT b.*, count(*) OVER () AS total,
               (SELECT count(*) FROM memory_units m WHERE m.bank_id = b.bank_id) AS fact_count,
               (SELECT max(updated_at) FROM documents d WHERE d.bank_id = b.bank_id) AS last_document_at,
               (SELECT max(created_at) FROM memory_units m WHERE m.bank_id = b.bank_id) AS last_write_at
        FROM banks b
        WHERE ($1::text IS NULL OR b.bank_id ILIKE $1 OR b.name ILIKE $1)
          AND ($4::text[] IS NULL OR b.bank_id ~ ANY($4::text[]))
        ORDER BY b.created_at, b.bank_id
        LIMIT $2 OFFSET $3
        """,
        like_pattern(q) if q is not None else None,
        limit,
        offset,
        only,
    )
    total = rows[0]["total"] if rows else await _count_banks(conn, q, only)
    return rows, total


async def _count_banks(conn: Conn, q: str | None, only: list[str] | None) -> int:
    return await conn.fetchval(
        """
        SELECT count(*) FROM banks b
        WHERE ($1::text IS NULL OR b.bank_id ILIKE $1 OR b.name ILIKE $1)
          AND ($2::text[] IS NULL OR b.bank_id ~ ANY($2::text[]))
        """,
        like_pattern(q) if q is not None else None,
        only,
    )


async def bank_stats(conn: Conn, bank_id: str) -> dict[str, Any]:
    """Counts for GET …/stats but the links' (`bank_link_counts`), in one round trip."""
    row = await conn.fetchrow(
        """
        SELECT
          (SELECT coalesce(jsonb_object_agg(fact_type, n), '{}') FROM
             (SELECT fact_type, count(*) n FROM memory_units WHERE bank_id = $1 GROUP BY 1) t) AS by_type,
          (SELECT count(*) FROM documents WHERE bank_id = $1) AS documents,
          (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM
             (SELECT status, count(*) n FROM async_operations WHERE bank_id = $1 GROUP BY 1) t) AS ops,
          (SELECT max(consolidated_at) FROM consolidation_status WHERE bank_id = $1) AS last_consolidated_at,
          (SELECT max(latest.created_at) FROM unnest(ARRAY['world', 'experience', 'observation']) AS f(fact_type)
           CROSS JOIN LATERAL (SELECT created_at FROM memory_units m WHERE m.bank_id = $1
                               AND m.fact_type = f.fact_type ORDER BY created_at DESC LIMIT 1) latest
          ) AS last_write_at,  -- the newest fact of each type: one index probe each, not every fact
          -- the facts waiting, read from the pending partial index alone: an observation is consolidated
          -- when written (migration 023's trigger) and never made to wait again, so no join to the facts
          -- is needed to leave observations out (it cost 58 ms at 100,000 waiting facts, against 5)
          (SELECT count(*) FROM consolidation_status WHERE bank_id = $1
             AND consolidated_at IS NULL AND failed_at IS NULL) AS pending_consolidation,
          (SELECT count(*) FROM consolidation_status WHERE bank_id = $1
             AND failed_at IS NOT NULL AND consolidated_at IS NULL) AS failed_consolidation
        """,
        bank_id,
    )
    return dict(row)


async def bank_link_counts(conn: Conn, bank_id: str) -> dict[str, dict[str, int]]:
    """The bank's links by type (`by_link`) and by "source fact type/link type" (`breakdown`). The
    one part of a bank's stats that grows with its links, ~50 a memory: ~1 s at 100,000 memories."""
    row = await conn.fetchrow(
        """
        SELECT
          (SELECT coalesce(jsonb_object_agg(link_type, n), '{}') FROM
             (SELECT link_type, count(*) n FROM memory_links WHERE bank_id = $1 GROUP BY 1) t) AS by_link,
          (SELECT coalesce(jsonb_object_agg(k, v), '{}') FROM
             (SELECT m.fact_type || '/' || l.link_type AS k, count(*) v
              FROM memory_links l JOIN memory_units m ON m.id = l.from_unit
              WHERE l.bank_id = $1 GROUP BY 1) t) AS breakdown
        """,
        bank_id,
    )
    return {"by_link": dict(row["by_link"]), "breakdown": dict(row["breakdown"])}
