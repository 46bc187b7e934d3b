"""Queries on entities, their mentions (unit_entities) and co-occurrences."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg


async def insert_entities(
    conn: asyncpg.Connection, bank_id: str, rows: list[tuple[str, str, str | None]], seen_at: datetime
) -> list[uuid.UUID]:
    """Create one entity per (name, kind, entity_type); returns their ids in the same order."""
    if not rows:
        return []
    ids = [uuid.uuid4() for _ in rows]
    await conn.execute(
        """
        INSERT INTO entities (id, bank_id, canonical_name, entity_kind, entity_type, first_seen, last_seen)
        SELECT u.id, $1, u.name, u.kind, u.type, $6, $6
        FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[]) AS u(id, name, kind, type)
        """,
        bank_id,
        ids,
        [name for name, _, _ in rows],
        [kind for _, kind, _ in rows],
        [entity_type for _, _, entity_type in rows],
        seen_at,
    )
    return ids


async def touch_entities(
    conn: asyncpg.Connection, ids: list[uuid.UUID], types: list[str | None], seen_at: datetime
) -> None:
    """Entities mentioned again: seen now, and given a kind (entity_type) if they had none.

    Their rows are locked first, in id order: two retains updating the same entities in the orders
    their joins happened to take deadlocked. Locked here, they are also held for the mention counts
    `link_units_to_entities` adds next."""
    if not ids:
        return
    await conn.execute(
        """
        WITH locked AS (SELECT id FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE)
        UPDATE entities e SET last_seen = greatest(e.last_seen, $3), first_seen = least(e.first_seen, $3),
                              entity_type = coalesce(e.entity_type, t.type)
        FROM (SELECT DISTINCT ON (id) id, type FROM unnest($1::uuid[], $2::text[]) AS u(id, type)
              ORDER BY id, type NULLS LAST) t
        WHERE e.id = t.id AND e.id IN (SELECT id FROM locked)
        """,
        ids,
        types,
        seen_at,
    )


async def promote_to_label(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> None:
    """A free-form entity that carries a label's exact name becomes that label (exact names only from
    then on)."""
    if ids:
        await conn.execute("UPDATE entities SET entity_kind = 'label' WHERE id = ANY($1::uuid[])", ids)


async def link_units_to_entities(
    conn: asyncpg.Connection, bank_id: str, links: list[tuple[uuid.UUID, uuid.UUID, str]]
) -> None:
    """links: (unit_id, entity_id, the name as written), one per unit and entity. Also bumps mention
    counts and co-occurrence counts. One statement for the three tables (each part reads only the
    arguments): three were three round trips of every retain's transaction, its locks held meanwhile.
    The entities are locked already (`touch_entities`, or created in this transaction)."""
    if not links:
        return
    await conn.execute(
        """
        WITH linked AS (
            INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
            SELECT u, e, $1, n FROM unnest($2::uuid[], $3::uuid[], $4::text[]) AS t(u, e, n) ON CONFLICT DO NOTHING
        ),
        counted AS (
            UPDATE entities e SET mention_count = e.mention_count + t.n
            FROM (SELECT x AS id, count(*) AS n FROM unnest($3::uuid[]) AS x GROUP BY x ORDER BY x) t
            WHERE e.id = t.id
        )
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
        [u for u, _, _ in links],
        [e for _, e, _ in links],
        [n for _, _, n in links],
    )


async def entities_of_units(conn: asyncpg.Connection, unit_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT DISTINCT entity_id FROM unit_entities WHERE unit_id = ANY($1::uuid[])", unit_ids
    )
    return [row["entity_id"] for row in rows]


# Up to this many removed mentions, only the entity pairs they joined are recounted; past it, every
# pair of every touched entity is, in one join (cheaper than a lookup per pair when most pairs change).
PAIRWISE_RECOUNT_LIMIT = 200


async def refresh_entity_counts(
    conn: asyncpg.Connection, removed_units: list[uuid.UUID], removed_entities: list[uuid.UUID]
) -> None:
    """After entity mentions were removed (the i-th unit mentioned the i-th entity; their facts deleted
    or their mentions detached): recount the entities' mentions and the co-occurrences the removed
    facts had joined, and remove the entities no fact mentions any more."""
    if not removed_entities:
        return
    if len(removed_entities) > PAIRWISE_RECOUNT_LIMIT:
        await recount_entities(conn, list(set(removed_entities)))
        return
    entity_ids = list(set(removed_entities))
    await _recount_mentions(conn, entity_ids)
    await _recount_pairs(conn, removed_units, removed_entities)
    await _delete_unmentioned(conn, entity_ids)


async def recount_entities(conn: asyncpg.Connection, entity_ids: list[uuid.UUID]) -> None:
    """Recount these entities' mentions and all of their co-occurrences from the facts left, and
    remove the entities no fact mentions any more: after many of their mentions went at once."""
    if not entity_ids:
        return
    await _recount_mentions(conn, entity_ids)
    await _recount_all_pairs_of(conn, entity_ids)
    await _delete_unmentioned(conn, entity_ids)


async def _recount_mentions(conn: asyncpg.Connection, entity_ids: list[uuid.UUID]) -> None:
    await conn.execute(
        """
        UPDATE entities e SET mention_count = (SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = e.id)
        WHERE e.id = ANY($1::uuid[])
        """,
        entity_ids,
    )


async def _delete_unmentioned(conn: asyncpg.Connection, entity_ids: list[uuid.UUID]) -> None:
    await conn.execute("DELETE FROM entities WHERE id = ANY($1::uuid[]) AND mention_count = 0", entity_ids)


async def _recount_pairs(
    conn: asyncpg.Connection, removed_units: list[uuid.UUID], removed_entities: list[uuid.UUID]
) -> None:
    """Recount the co-occurrence of each pair of entities one removed unit mentioned together: the
    facts still mentioning both (one index range of the first entity, a key lookup of the second)."""
    await conn.execute(
        """
        WITH pairs AS (
            SELECT DISTINCT a.e AS entity_a, b.e AS entity_b
            FROM unnest($1::uuid[], $2::uuid[]) AS a(u, e)
            JOIN unnest($1::uuid[], $2::uuid[]) AS b(u, e) ON a.u = b.u AND a.e < b.e
        ), counted AS (
            SELECT p.entity_a, p.entity_b, c.n, c.last_cooccurred FROM pairs p
            CROSS JOIN LATERAL (
                SELECT count(*) AS n, max(m.created_at) AS last_cooccurred
                FROM unit_entities x
                JOIN unit_entities y ON y.unit_id = x.unit_id AND y.entity_id = p.entity_b
                JOIN memory_units m ON m.id = x.unit_id
                WHERE x.entity_id = p.entity_a
            ) c
        ), gone AS (
            DELETE FROM entity_cooccurrences ec USING counted
            WHERE ec.entity_a = counted.entity_a AND ec.entity_b = counted.entity_b AND counted.n = 0
        )
        UPDATE entity_cooccurrences ec SET count = counted.n, last_cooccurred = counted.last_cooccurred
        FROM counted
        WHERE ec.entity_a = counted.entity_a AND ec.entity_b = counted.entity_b AND counted.n > 0
        """,
        removed_units,
        removed_entities,
    )


async def _recount_all_pairs_of(conn: asyncpg.Connection, entity_ids: list[uuid.UUID]) -> None:
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


async def find_by_names(
    conn: asyncpg.Connection, bank_id: str, keys: list[str]
) -> dict[str, list[asyncpg.Record]]:
    """Entities (of any kind) whose lower-cased name is in `keys`, by that key, most mentioned first."""
    rows = await conn.fetch(
        """
        SELECT id, canonical_name, lower(canonical_name) AS key, entity_kind, mention_count, last_seen
        FROM entities WHERE bank_id = $1 AND lower(canonical_name) = ANY($2::text[])
        ORDER BY mention_count DESC, first_seen, id
        """,
        bank_id,
        keys,
    )
    found: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        found.setdefault(row["key"], []).append(row)
    return found


async def trigram_candidates(
    conn: asyncpg.Connection, bank_id: str, keys: list[str], min_similarity: float, per_name: int = 10
) -> dict[str, list[asyncpg.Record]]:
    """For each lower-cased name, the bank's free-form entities with trigram similarity ≥ min_similarity."""
    # Through the GiST index whatever PostgreSQL's statistics say of the bank (migration 032).
    rows = await conn.fetch("SELECT * FROM similar_free_entities($1, $2, $3, $4)",
                            bank_id, keys, min_similarity, per_name)
    found: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        found.setdefault(row["key"], []).append(row)
    return found


# Partners read per candidate entity when scoring a match: the most frequent ones. A popular entity
# can co-occur with thousands; reading them all would make every retain mentioning it slow.
MAX_PARTNERS = 200


async def cooccurrence_partners(
    conn: asyncpg.Connection, entity_ids: list[uuid.UUID], among: list[uuid.UUID]
) -> dict[uuid.UUID, set[uuid.UUID]]:
    """Each entity's MAX_PARTNERS most frequent co-occurrence partners (ties by id), ranked among all its
    partners, of which only those in `among` are returned: a match is scored on the partners it shares
    with the mention's neighbours, so the others need not travel. (At 133,000 facts a 500-item retain
    scored ~430 candidates with ~33,000 ranked partners, ~18,000 of them among the neighbours.)"""
    rows = await conn.fetch(
        """
        SELECT id, partner FROM (
            SELECT id, partner, row_number() OVER (PARTITION BY id ORDER BY count DESC, partner) AS rank
            FROM (SELECT entity_a AS id, entity_b AS partner, count FROM entity_cooccurrences
                  WHERE entity_a = ANY($1::uuid[])
                  UNION ALL
                  SELECT entity_b, entity_a, count FROM entity_cooccurrences WHERE entity_b = ANY($1::uuid[])) pairs
        ) ranked WHERE rank <= $2 AND partner = ANY($3::uuid[])
        """,
        entity_ids,
        MAX_PARTNERS,
        among,
    )
    partners: dict[uuid.UUID, set[uuid.UUID]] = {}
    for row in rows:
        partners.setdefault(row["id"], set()).add(row["partner"])
    return partners
