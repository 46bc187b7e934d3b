"""The writes of a bank import, in the caller's transaction: what the retain path does not set
(a fact's own timestamps and curation state), observations as they were (with their history),
mental models with their history, and directives. Batched with unnest, one round trip each."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engram.store.pool import encode_vector


@dataclass
class UnitLifecycle:
    """A restored fact's consolidation state (the rest of its history is set at insert: `UnitRow`)."""

    id: uuid.UUID
    consolidated_at: datetime | None
    consolidation_failed_at: datetime | None
    consolidation_error: str | None


async def set_unit_lifecycle(conn: asyncpg.Connection, rows: list[UnitLifecycle]) -> None:
    """The facts' consolidation marks, on the status rows their insert made (queued at their created_at)."""
    if not rows:
        return
    await conn.execute(
        """
        UPDATE consolidation_status s SET consolidated_at = u.consolidated_at, failed_at = u.failed_at,
               error = u.error
        FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::text[])
          AS u(id, consolidated_at, failed_at, error)
        WHERE s.unit_id = u.id
        """,
        [r.id for r in rows], [r.consolidated_at for r in rows],
        [r.consolidation_failed_at for r in rows], [r.consolidation_error for r in rows],
    )


async def set_documents_created(
    conn: asyncpg.Connection, bank_id: str, created: list[tuple[str, datetime]]
) -> None:
    """Documents' creation times as archived: (document id, created_at), in one statement."""
    if not created:
        return
    ids, times = (list(column) for column in zip(*created, strict=True))
    await conn.execute(
        "UPDATE documents d SET created_at = u.t FROM unnest($2::text[], $3::timestamptz[]) AS u(id, t)"
        " WHERE d.bank_id = $1 AND d.id = u.id",
        bank_id, ids, times,
    )


@dataclass
class ObservationRow:
    id: uuid.UUID
    text: str
    tags: list[str]
    vector: Any
    sources: list[uuid.UUID]
    evidence: list[dict[str, Any]]
    proof_count: int
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    created_at: datetime | None
    observation_scopes: Any
    token_count: int


async def insert_observations(conn: asyncpg.Connection, bank_id: str, rows: list[ObservationRow]) -> None:
    """Observations as the archive has them, then the entities of their sources, as consolidation does."""
    if not rows:
        return
    await conn.execute(
        """
        INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, tags, source_memory_ids, evidence,
                                  proof_count, occurred_start, occurred_end, mentioned_at, created_at,
                                  observation_scopes, token_count)
        SELECT u.id, $1, u.text, 'observation', u.vec, ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)),
               u.sources::uuid[], u.evidence::jsonb, u.proofs, u.os, u.oe, u.said, coalesce(u.created, now()),
               nullif(u.scopes, 'null')::jsonb, u.tokens
        FROM unnest($2::uuid[], $3::text[], $4::vector[], $5::text[], $6::text[], $7::text[], $8::int[],
                    $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::text[],
                    $14::int[])
             AS u(id, text, vec, tags, sources, evidence, proofs, os, oe, said, created, scopes, tokens)
        """,
        # the vectors in pgvector's binary form: as text, formatting took ~0.1 ms each on the event loop
        bank_id, [r.id for r in rows], [r.text for r in rows], [encode_vector(r.vector) for r in rows],
        [json.dumps(r.tags) for r in rows], ["{" + ",".join(str(s) for s in r.sources) + "}" for r in rows],
        [json.dumps(r.evidence) for r in rows], [r.proof_count for r in rows], [r.occurred_start for r in rows],
        [r.occurred_end for r in rows], [r.mentioned_at for r in rows], [r.created_at for r in rows],
        [json.dumps(r.observation_scopes) for r in rows], [r.token_count for r in rows],
    )
    await conn.execute(
        """
        INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
        SELECT DISTINCT ON (o.id, ue.entity_id) o.id, ue.entity_id, $1, ue.mention
        FROM memory_units o, unnest(o.source_memory_ids) AS s(id)
        JOIN unit_entities ue ON ue.unit_id = s.id
        WHERE o.id = ANY($2::uuid[])
        ON CONFLICT DO NOTHING
        """,
        bank_id, [r.id for r in rows],
    )


async def insert_observation_history(conn: asyncpg.Connection, bank_id: str, rows: list[tuple]) -> None:
    """rows: (observation id, text, source ids, evidence, reason, changed_at), oldest first."""
    if not rows:
        return
    await conn.execute(
        """
        INSERT INTO observation_history (observation_id, bank_id, text, source_memory_ids, evidence, reason, changed_at)
        SELECT u.id, $1, u.text, u.sources::uuid[], u.evidence::jsonb, u.reason, coalesce(u.changed, now())
        FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
             WITH ORDINALITY AS u(id, text, sources, evidence, reason, changed, ord)
        ORDER BY u.ord
        """,
        bank_id, [r[0] for r in rows], [r[1] for r in rows], ["{" + ",".join(map(str, r[2])) + "}" for r in rows],
        [json.dumps(r[3]) for r in rows], [r[4] for r in rows], [r[5] for r in rows],
    )


async def insert_mental_model(conn: asyncpg.Connection, bank_id: str, row: dict[str, Any], vector: Any) -> None:
    await conn.execute(
        """
        INSERT INTO mental_models (bank_id, id, name, source_query, content, tags, max_tokens, trigger, embedding,
                                   reflect_response, last_refreshed_at, last_memory_seen_at, last_refresh_failed_at,
                                   last_refresh_error, created_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::vector, $10, $11, $12, $13, $14, coalesce($15, now()))
        ON CONFLICT (bank_id, id) DO UPDATE SET name = excluded.name, source_query = excluded.source_query,
            content = excluded.content, tags = excluded.tags, max_tokens = excluded.max_tokens,
            trigger = excluded.trigger, embedding = excluded.embedding, reflect_response = excluded.reflect_response,
            last_refreshed_at = excluded.last_refreshed_at, updated_at = now()
        """,
        bank_id, row["id"], row["name"], row["source_query"], row.get("content"), row.get("tags") or [],
        row.get("max_tokens") or 2048, row.get("trigger") or {}, vector, row.get("reflect_response"),
        row.get("last_refreshed_at"), row.get("last_memory_seen_at"), row.get("last_refresh_failed_at"),
        row.get("last_refresh_error"), row.get("created_at"),
    )


async def insert_mental_model_history(conn: asyncpg.Connection, bank_id: str, rows: list[tuple]) -> None:
    """rows: (mental model id, content, refreshed_at, replaced_at), oldest first."""
    if not rows:
        return
    await conn.execute(
        """
        INSERT INTO mental_model_history (bank_id, mental_model_id, content, refreshed_at, replaced_at)
        SELECT $1, u.model, u.content, u.refreshed, coalesce(u.replaced, now())
        FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[]) WITH ORDINALITY
             AS u(model, content, refreshed, replaced, ord)
        ORDER BY u.ord
        """,
        bank_id, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
    )


async def insert_directive(conn: asyncpg.Connection, bank_id: str, row: dict[str, Any]) -> None:
    """Under its own id when that id is free in this database (ids are global), else a new one."""
    await conn.execute(
        """
        INSERT INTO directives (id, bank_id, name, content, priority, is_active, tags, created_at, updated_at)
        SELECT CASE WHEN EXISTS (SELECT 1 FROM directives WHERE id = $1) THEN gen_random_uuid() ELSE $1 END,
               $2, $3, $4, $5, $6, $7, coalesce($8, now()), coalesce($9, now())
        """,
        row["id"], bank_id, row["name"], row["content"], int(row.get("priority") or 0),
        bool(row.get("is_active", True)), row.get("tags") or [], row.get("created_at"), row.get("updated_at"),
    )


async def insert_links(
    conn: asyncpg.Connection, bank_id: str, links: list[tuple[uuid.UUID | str, uuid.UUID | str, str, float]]
) -> None:
    """links: (from unit, to unit, link type, weight), as an Engram archive carries them; a unit is
    a UUID or its text."""
    if not links:
        return
    await conn.execute(
        """
        INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
        SELECT u.a, u.b, $1, u.t, u.w FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::real[]) AS u(a, b, t, w)
        ON CONFLICT DO NOTHING
        """,
        bank_id, [r[0] for r in links], [r[1] for r in links], [r[2] for r in links], [r[3] for r in links],
    )
