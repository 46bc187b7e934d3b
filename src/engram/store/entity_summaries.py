"""Queries for entity observations: which entities of a retain qualify, an entity's most recent
facts, and its one summary (replaced on regeneration, stale once its recent facts changed)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from engram.store.tx import Conn


def _recent_facts(entity: str, limit: str) -> str:
    """An entity's most recent facts: by when each was said (mentioned), else when it was stored."""
    return f"""
        SELECT m.id, m.text, m.mentioned_at, m.occurred_start
        FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
        WHERE ue.entity_id = {entity} AND m.fact_type IN ('world', 'experience')
        ORDER BY coalesce(m.mentioned_at, m.created_at) DESC, m.created_at DESC, m.id DESC
        LIMIT {limit}
    """


@dataclass
class Summary:
    text: str
    generated_at: datetime
    stale: bool


async def top_entities_of_units(
    conn: Conn, unit_ids: list[uuid.UUID], top: int, min_facts: int
) -> list[uuid.UUID]:
    """Of the free-form entities these facts mention, the `top` mentioned by the most of them (ties:
    the most mentioned overall); of those, the ones with at least `min_facts` facts in the bank."""
    rows = await conn.fetch(
        """
        WITH batch AS (
            SELECT e.id, count(*) AS in_batch, e.mention_count, e.canonical_name
            FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
            WHERE ue.unit_id = ANY($1::uuid[]) AND e.entity_kind = 'free'
            GROUP BY e.id
            ORDER BY in_batch DESC, e.mention_count DESC, e.canonical_name, e.id
            LIMIT $2
        )
        SELECT b.id FROM batch b
        WHERE (SELECT count(*) FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
               WHERE ue.entity_id = b.id AND m.fact_type IN ('world', 'experience')) >= $3
        ORDER BY b.in_batch DESC, b.mention_count DESC, b.canonical_name, b.id
        """,
        unit_ids,
        top,
        min_facts,
    )
    return [row["id"] for row in rows]


async def add_to_pending_job(conn: Conn, operation_id: uuid.UUID, entity_ids: list[str]) -> bool:
    """Add entities to a summary job still pending; False when a worker has claimed it meanwhile."""
    row = await conn.fetchrow(
        """
        UPDATE async_operations SET updated_at = now(), payload = jsonb_build_object('entity_ids', (
            SELECT jsonb_agg(DISTINCT i) FROM (
                SELECT jsonb_array_elements_text(payload->'entity_ids') AS i UNION SELECT unnest($2::text[])
            ) ids))
        WHERE id = $1 AND status = 'pending'
        RETURNING id
        """,
        operation_id,
        entity_ids,
    )
    return row is not None


async def recent_facts(conn: Conn, entity_id: uuid.UUID, limit: int) -> list[asyncpg.Record]:
    return await conn.fetch(_recent_facts("$1", "$2"), entity_id, limit)


async def replace_summary(
    conn: Conn, bank_id: str, entity_id: uuid.UUID, text: str, source_fact_ids: list[uuid.UUID]
) -> None:
    """The entity's summary becomes `text`; the previous one is gone (replaced, not accumulated).
    Nothing is written when the entity was deleted meanwhile."""
    await conn.execute(
        """
        INSERT INTO entity_summaries (entity_id, bank_id, text, source_fact_ids, generated_at)
        SELECT id, bank_id, $3, $4, now() FROM entities WHERE id = $1 AND bank_id = $2
        ON CONFLICT (entity_id) DO UPDATE
            SET text = excluded.text, source_fact_ids = excluded.source_fact_ids, generated_at = now()
        """,
        entity_id,
        bank_id,
        text,
        source_fact_ids,
    )


def summary_of(entity: str, window: str) -> str:
    """A query of the summary (text, generated_at, stale) of the entity the SQL expression `entity`
    names, if it has one: stale when its entity's `window` most recent facts are no longer the ones it
    was generated from (facts arrived, or were deleted, since)."""
    return f"""
        SELECT s.text, s.generated_at, NOT (s.source_fact_ids @> r.ids AND r.ids @> s.source_fact_ids) AS stale
        FROM entity_summaries s
        CROSS JOIN LATERAL (
            SELECT coalesce(array_agg(f.id), '{{}}') AS ids FROM ({_recent_facts("s.entity_id", window)}) f
        ) r
        WHERE s.entity_id = {entity}"""


async def summaries(conn: Conn, entity_ids: list[uuid.UUID], window: int) -> dict[uuid.UUID, Summary]:
    """The summaries of these entities (`summary_of`)."""
    rows = await conn.fetch(
        f"""
        SELECT e.id AS entity_id, s.* FROM unnest($1::uuid[]) AS e(id)
        CROSS JOIN LATERAL ({summary_of("e.id", "$2")}) s
        """,
        entity_ids,
        window,
    )
    return {row["entity_id"]: Summary(row["text"], row["generated_at"], row["stale"]) for row in rows}
