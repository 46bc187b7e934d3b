"""Read queries over the observation scopes of a bank: each distinct tag set its observations carry,
with how many observations it holds (for GET …/observations/scopes and the strategies preview)."""

from __future__ import annotations

from engram.store.tx import Conn

Scope = tuple[str, ...]

# Consolidation stores scopes sorted and de-duplicated; normalising again here keeps rows written by
# any other path (imports, older versions) from showing up as a second, differently ordered scope.
# "C" collation sorts like Python's sorted(), so scopes compare equal to consolidation's own.
_SCOPES = """
    SELECT s.tags, count(*) AS n
    FROM memory_units m,
         LATERAL (SELECT ARRAY(SELECT t FROM unnest(m.tags) t GROUP BY t ORDER BY t COLLATE "C") AS tags) s
    WHERE m.bank_id = $1 AND m.fact_type = 'observation'
    GROUP BY s.tags
    ORDER BY n DESC, s.tags::text COLLATE "C"
"""

_COUNT = f"SELECT count(*) FROM ({_SCOPES}) scopes"


async def list_scopes(conn: Conn, bank_id: str, limit: int, offset: int) -> tuple[list[tuple[Scope, int]], int]:
    """One page of the bank's scopes, most observations first, and how many distinct scopes it has."""
    rows = await conn.fetch(f"{_SCOPES} LIMIT $2 OFFSET $3", bank_id, limit, offset)
    if rows and offset == 0 and len(rows) < limit:
        total = len(rows)
    else:
        total = await conn.fetchval(_COUNT, bank_id)
    return [(tuple(row["tags"]), row["n"]) for row in rows], total


async def scan_scopes(conn: Conn, bank_id: str, max_scopes: int = 10_000) -> tuple[list[tuple[Scope, int]], bool]:
    """Up to `max_scopes` scopes, most observations first, and whether that is all of them."""
    rows = await conn.fetch(f"{_SCOPES} LIMIT $2", bank_id, max_scopes + 1)
    scopes = [(tuple(row["tags"]), row["n"]) for row in rows[:max_scopes]]
    return scopes, len(rows) <= max_scopes
