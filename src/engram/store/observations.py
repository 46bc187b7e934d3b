"""Queries for consolidation: unconsolidated facts, observations of a scope, and the writes that
create, rewrite and delete observations with their history."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.models.tokens import count_tokens
from engram.store.consolidation_status import waiting_facts
from engram.store.pool import encode_vector
from engram.store.storable import storable_text
from engram.store.tx import Conn
from engram.store.unit_ids import new_unit_id
from engram.store.vector_index import indexed_distance

HISTORY_LIMIT = 50


async def unconsolidated_facts(conn: Conn, bank_id: str, limit: int, scopes: list[list[str]] | None) -> list[asyncpg.Record]:
    """Facts waiting for consolidation, oldest first. With scopes, only facts carrying all the tags of
    at least one of them."""
    return await conn.fetch(
        f"""
        SELECT m.id, m.text, m.tags, m.observation_scopes, m.embedding, m.occurred_start, m.occurred_end,
               m.mentioned_at, m.created_at
        FROM {waiting_facts("$1")}
          AND ($3::jsonb IS NULL OR EXISTS (
                SELECT 1 FROM jsonb_array_elements($3::jsonb) s
                WHERE m.tags @> ARRAY(SELECT jsonb_array_elements_text(s))))
        ORDER BY c.queued_at, c.unit_id
        LIMIT $2
        """,
        bank_id,
        limit,
        scopes,
    )


async def related_observations(
    conn: Conn, bank_id: str, scope: list[str], vectors: list[Any], per_fact: int
) -> list[asyncpg.Record]:
    """The observations of exactly this scope closest to any of the facts' vectors."""
    return await conn.fetch(
        f"""
        SELECT DISTINCT ON (o.id) o.id, o.text, o.proof_count, o.source_memory_ids, o.evidence, o.embedding
        FROM unnest($3::vector[]) AS q(vec)
        CROSS JOIN LATERAL (
            SELECT m.id, m.text, m.proof_count, m.source_memory_ids, m.evidence, m.embedding
            FROM memory_units m
            WHERE m.bank_id = $1 AND m.fact_type = 'observation'
              AND m.tags @> $2::text[] AND m.tags <@ $2::text[]
            ORDER BY {indexed_distance("m.embedding", "q.vec")}
            LIMIT $4
        ) o
        """,
        bank_id,
        scope,
        [encode_vector(v) for v in vectors],
        per_fact,
    )


async def nearest_in_scope(
    conn: Conn, bank_id: str, scope: list[str], vector: Any, exclude: list[uuid.UUID], limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""
        SELECT * FROM (
            SELECT m.id, m.text, m.source_memory_ids, m.evidence, 1 - (m.embedding <=> $3::vector) AS similarity
            FROM memory_units m
            WHERE m.bank_id = $1 AND m.fact_type = 'observation' AND m.tags @> $2::text[] AND m.tags <@ $2::text[]
              AND NOT (m.id = ANY($4::uuid[]))
            ORDER BY {indexed_distance("m.embedding", "$3::vector")}
            LIMIT $5
        ) nearest
        ORDER BY similarity DESC, id
        """,
        bank_id,
        scope,
        encode_vector(vector),
        exclude,
        limit,
    )


async def count_in_scope(conn: Conn, bank_id: str, scope: list[str]) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'"
        " AND tags @> $2::text[] AND tags <@ $2::text[]",
        bank_id,
        scope,
    )


async def insert_observation(
    conn: asyncpg.Connection, bank_id: str, *, text: str, scope: list[str], vector: Any,
    sources: list[uuid.UUID], evidence: list[dict[str, str]],
) -> uuid.UUID:
    """A new observation; its dates, proof count and entities come from its sources."""
    observation_id = new_unit_id()
    await conn.execute(
        """
        INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, tags, source_memory_ids, evidence,
                                  proof_count, occurred_start, occurred_end, mentioned_at, token_count)
        SELECT $1, $2, $3, 'observation', $4::vector, $5::text[], $6::uuid[], $7::jsonb, cardinality($6::uuid[]),
               min(coalesce(s.occurred_start, s.mentioned_at)), max(coalesce(s.occurred_end, s.mentioned_at)),
               max(s.mentioned_at), $8
        FROM memory_units s WHERE s.id = ANY($6::uuid[])
        """,
        observation_id, bank_id, text, encode_vector(vector), scope, sources, evidence, count_tokens(text),
    )
    await _link_source_entities(conn, bank_id, observation_id)
    return observation_id


async def rewrite_observation(
    conn: asyncpg.Connection, bank_id: str, observation_id: uuid.UUID, *, text: str, vector: Any,
    sources: list[uuid.UUID], evidence: list[dict[str, str]], reason: str | None,
) -> None:
    """Keep the current wording in history (at most 50 versions), then rewrite with the union of
    sources; the proof count is the number of distinct live sources."""
    await conn.execute(
        """
        INSERT INTO observation_history (observation_id, bank_id, text, source_memory_ids, evidence, reason)
        SELECT id, bank_id, text, source_memory_ids, evidence, $2 FROM memory_units WHERE id = $1
        """,
        observation_id,
        reason,
    )
    await conn.execute(
        """
        DELETE FROM observation_history WHERE observation_id = $1 AND id NOT IN (
            SELECT id FROM observation_history WHERE observation_id = $1 ORDER BY changed_at DESC, id DESC LIMIT $2)
        """,
        observation_id,
        HISTORY_LIMIT,
    )
    await conn.execute(
        """
        WITH live AS (SELECT array_agg(DISTINCT s.id) AS ids,
                             min(coalesce(s.occurred_start, s.mentioned_at)) AS lo,
                             max(coalesce(s.occurred_end, s.mentioned_at)) AS hi, max(s.mentioned_at) AS said
                      FROM memory_units s WHERE s.id = ANY($3::uuid[]))
        UPDATE memory_units m SET text = $2, embedding = $4::vector, source_memory_ids = coalesce(live.ids, '{}'),
               proof_count = coalesce(cardinality(live.ids), 0), evidence = $5::jsonb, occurred_start = live.lo,
               occurred_end = live.hi, mentioned_at = live.said, updated_at = now(), token_count = $6
        FROM live WHERE m.id = $1
        """,
        observation_id, text, sources, encode_vector(vector), evidence, count_tokens(text),
    )
    await mark_consolidated(conn, [observation_id])
    await conn.execute("DELETE FROM unit_entities WHERE unit_id = $1", observation_id)
    await _link_source_entities(conn, bank_id, observation_id)


async def _link_source_entities(conn: asyncpg.Connection, bank_id: str, observation_id: uuid.UUID) -> None:
    """An observation mentions the entities of its sources, so entity views and the graph see it."""
    await conn.execute(
        """
        INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
        SELECT DISTINCT ON (ue.entity_id) $1, ue.entity_id, $2, ue.mention
        FROM memory_units o, unnest(o.source_memory_ids) AS s(id)
        JOIN unit_entities ue ON ue.unit_id = s.id
        WHERE o.id = $1
        ON CONFLICT DO NOTHING
        """,
        observation_id,
        bank_id,
    )


async def delete_observations(conn: Conn, ids: list[uuid.UUID]) -> int:
    if not ids:
        return 0
    status = await conn.execute(
        "DELETE FROM memory_units WHERE id = ANY($1::uuid[]) AND fact_type = 'observation'", ids
    )
    return int(status.split()[-1])


async def mark_consolidated(conn: Conn, fact_ids: list[uuid.UUID]) -> None:
    await conn.execute(
        "UPDATE consolidation_status SET consolidated_at = now(), error = NULL WHERE unit_id = ANY($1::uuid[])",
        fact_ids,
    )


async def mark_failed(conn: Conn, fact_id: uuid.UUID, reason: str) -> None:
    await conn.execute(
        "UPDATE consolidation_status SET failed_at = now(), error = $2 WHERE unit_id = $1",
        fact_id,
        storable_text(reason[:2000]),
    )


async def reset_sources(conn: Conn, fact_ids: list[uuid.UUID]) -> None:
    """Make facts wait for consolidation again."""
    if fact_ids:
        await conn.execute(
            "UPDATE consolidation_status c SET consolidated_at = NULL, failed_at = NULL, error = NULL"
            " FROM memory_units m WHERE c.unit_id = ANY($1::uuid[]) AND m.id = c.unit_id"
            " AND m.fact_type <> 'observation'",
            fact_ids,
        )


async def forget_sources(conn: asyncpg.Connection, bank_id: str, deleted: list[uuid.UUID]) -> list[uuid.UUID]:
    """After facts were deleted: observations left with no source are deleted, the others lose the
    deleted sources (and their quotes) and their remaining sources wait for consolidation again.
    Returns the ids of the facts reset."""
    if not deleted:
        return []
    rows = await conn.fetch(
        """
        SELECT id, ARRAY(SELECT s FROM unnest(source_memory_ids) s WHERE NOT (s = ANY($2::uuid[]))) AS remaining
        FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation' AND source_memory_ids && $2::uuid[]
        """,
        bank_id,
        deleted,
    )
    orphans = [row["id"] for row in rows if not row["remaining"]]
    await delete_observations(conn, orphans)
    survivors = [row for row in rows if row["remaining"]]
    if survivors:
        await conn.execute(
            """
            UPDATE memory_units m SET source_memory_ids = u.remaining::uuid[], proof_count = cardinality(u.remaining::uuid[]),
                   evidence = coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements(m.evidence) e
                                        WHERE (e->>'fact_id')::uuid = ANY(u.remaining::uuid[])), '[]'),
                   updated_at = now()
            FROM unnest($1::uuid[], $2::text[]) AS u(id, remaining) WHERE m.id = u.id
            """,
            [row["id"] for row in survivors],
            ["{" + ",".join(str(s) for s in row["remaining"]) + "}" for row in survivors],
        )
    reset = list({s for row in survivors for s in row["remaining"]})
    await reset_sources(conn, reset)
    return reset


async def history(conn: Conn, observation_id: uuid.UUID) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT text, source_memory_ids, evidence, reason, changed_at FROM observation_history"
        " WHERE observation_id = $1 ORDER BY changed_at DESC, id DESC",
        observation_id,
    )


async def reset_failed_consolidation(conn: Conn, bank_id: str) -> int:
    """Facts consolidation gave up on wait for it again; returns how many."""
    result = await conn.execute(
        "UPDATE consolidation_status c SET failed_at = NULL, error = NULL FROM memory_units m"
        " WHERE c.bank_id = $1 AND c.failed_at IS NOT NULL AND c.consolidated_at IS NULL"
        " AND m.id = c.unit_id AND m.fact_type <> 'observation'",
        bank_id,
    )
    return int(result.split()[-1])
