"""Queries on entities, their mentions (unit_entities) and co-occurrences."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg


async def upsert_entities(
    conn: asyncpg.Connection, bank_id: str, names: list[str], kinds: list[str], seen_at: datetime
) -> dict[str, uuid.UUID]:
    """Get or create one entity per name (case-insensitive); returns lower(name) → id.

    Names are inserted in sorted order so concurrent transactions lock index entries in the same
    order and cannot deadlock; the unique index makes concurrent creators converge on one row.
    """
    if not names:
        return {}
    order = sorted(range(len(names)), key=lambda i: names[i].lower())
    rows = await conn.fetch(
        """
        INSERT INTO entities (id, bank_id, canonical_name, entity_kind, first_seen, last_seen)
        SELECT gen_random_uuid(), $1, u.name, u.kind, $4, $4
        FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(name, kind, ord)
        ORDER BY u.ord
        ON CONFLICT (bank_id, lower(canonical_name)) DO UPDATE
            SET last_seen = greatest(entities.last_seen, excluded.last_seen),
                first_seen = least(entities.first_seen, excluded.first_seen)
        RETURNING id, lower(canonical_name) AS key
        """,
        bank_id,
        [names[i] for i in order],
        [kinds[i] for i in order],
        seen_at,
    )
    return {row["key"]: row["id"] for row in rows}


async def link_units_to_entities(
    conn: asyncpg.Connection, bank_id: str, links: list[tuple[uuid.UUID, uuid.UUID, str]]
) -> None:
    """links: (unit_id, entity_id, the name as written), one per unit and entity. Also bumps mention
    counts and co-occurrence counts."""
    if not links:
        return
    units = [u for u, _, _ in links]
    ents = [e for _, e, _ in links]
    await conn.execute(
        """
        INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
        SELECT u, e, $1, n FROM unnest($2::uuid[], $3::uuid[], $4::text[]) AS t(u, e, n) ON CONFLICT DO NOTHING
        """,
        bank_id,
        units,
        ents,
        [n for _, _, n in links],
    )
    await conn.execute(
        """
        UPDATE entities e SET mention_count = e.mention_count + t.n
        FROM (SELECT x AS id, count(*) AS n FROM unnest($1::uuid[]) AS x GROUP BY x ORDER BY x) t
        WHERE e.id = t.id
        """,
        ents,
    )
    await conn.execute(
        """
        INSERT INTO entity_cooccurrences (bank_id, entity_a, entity_b, count, last_cooccurred)
        SELECT $1, a.e, b.e, count(*), now()
        FROM unnest($2::uuid[], $3::uuid[]) AS a(u, e)
        JOIN unnest($2::uuid[], $3::uuid[]) AS b(u, e) ON a.u = b.u AND a.e < b.e
        GROUP BY a.e, b.e
        ORDER BY a.e, b.e
        ON CONFLICT (entity_a, entity_b) DO UPDATE
            SET count = entity_cooccurrences.count + excluded.count, last_cooccurred = now()
        """,
        bank_id,
        units,
        ents,
    )


async def entities_of_units(conn: asyncpg.Connection, unit_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT DISTINCT entity_id FROM unit_entities WHERE unit_id = ANY($1::uuid[])", unit_ids
    )
    return [row["entity_id"] for row in rows]


async def refresh_entity_counts(conn: asyncpg.Connection, entity_ids: list[uuid.UUID]) -> None:
    """After facts were deleted: recount mentions and co-occurrences of the affected entities and
    remove entities no fact mentions any more."""
    if not entity_ids:
        return
    await conn.execute(
        """
        UPDATE entities e SET mention_count = (SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = e.id)
        WHERE e.id = ANY($1::uuid[])
        """,
        entity_ids,
    )
    await conn.execute(
        "DELETE FROM entity_cooccurrences WHERE entity_a = ANY($1::uuid[]) OR entity_b = ANY($1::uuid[])",
        entity_ids,
    )
    await conn.execute(
        """
        INSERT INTO entity_cooccurrences (bank_id, entity_a, entity_b, count, last_cooccurred)
        SELECT a.bank_id, a.entity_id, b.entity_id, count(*), max(m.created_at)
        FROM unit_entities a
        JOIN unit_entities b ON a.unit_id = b.unit_id AND a.entity_id < b.entity_id
        JOIN memory_units m ON m.id = a.unit_id
        WHERE a.entity_id = ANY($1::uuid[]) OR b.entity_id = ANY($1::uuid[])
        GROUP BY a.bank_id, a.entity_id, b.entity_id
        ON CONFLICT (entity_a, entity_b) DO UPDATE SET count = excluded.count
        """,
        entity_ids,
    )
    await conn.execute(
        "DELETE FROM entities WHERE id = ANY($1::uuid[]) AND mention_count = 0", entity_ids
    )


async def find_by_names(conn: asyncpg.Connection, bank_id: str, keys: list[str]) -> dict[str, asyncpg.Record]:
    """Entities whose lower-cased name is in `keys`, by that key."""
    rows = await conn.fetch(
        """
        SELECT id, canonical_name, lower(canonical_name) AS key, mention_count, last_seen
        FROM entities WHERE bank_id = $1 AND lower(canonical_name) = ANY($2::text[])
        """,
        bank_id,
        keys,
    )
    return {row["key"]: row for row in rows}


async def trigram_candidates(
    conn: asyncpg.Connection, bank_id: str, keys: list[str], min_similarity: float, per_name: int = 10
) -> dict[str, list[asyncpg.Record]]:
    """For each lower-cased name, the bank's free-form entities with trigram similarity ≥ min_similarity."""
    rows = await conn.fetch(
        """
        SELECT n.key, c.id, c.canonical_name, c.similarity, c.last_seen, c.mention_count
        FROM unnest($2::text[]) AS n(key)
        CROSS JOIN LATERAL (
            SELECT e.id, e.canonical_name, e.last_seen, e.mention_count,
                   similarity(lower(e.canonical_name), n.key) AS similarity
            FROM entities e
            WHERE e.bank_id = $1 AND e.entity_kind = 'free'
            ORDER BY lower(e.canonical_name) <-> n.key  -- KNN on the GiST index: nearest names first
            LIMIT $4
        ) c
        WHERE c.similarity >= $3
        """,
        bank_id,
        keys,
        min_similarity,
        per_name,
    )
    found: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        found.setdefault(row["key"], []).append(row)
    return found


# Partners read per candidate entity when scoring a match: the most frequent ones. A popular entity
# can co-occur with thousands; reading them all would make every retain mentioning it slow.
MAX_PARTNERS = 200


async def cooccurrence_partners(
    conn: asyncpg.Connection, entity_ids: list[uuid.UUID]
) -> dict[uuid.UUID, set[uuid.UUID]]:
    rows = await conn.fetch(
        """
        SELECT id, partner FROM (
            SELECT id, partner, row_number() OVER (PARTITION BY id ORDER BY count DESC, partner) AS rank
            FROM (SELECT entity_a AS id, entity_b AS partner, count FROM entity_cooccurrences
                  WHERE entity_a = ANY($1::uuid[])
                  UNION ALL
                  SELECT entity_b, entity_a, count FROM entity_cooccurrences WHERE entity_b = ANY($1::uuid[])) pairs
        ) ranked WHERE rank <= $2
        """,
        entity_ids,
        MAX_PARTNERS,
    )
    partners: dict[uuid.UUID, set[uuid.UUID]] = {}
    for row in rows:
        partners.setdefault(row["id"], set()).add(row["partner"])
    return partners
