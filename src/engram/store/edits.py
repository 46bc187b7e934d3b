"""Writes that edit what is stored: a document's tags and observation scopes (carried to its facts),
and one memory's fields. Each runs in the caller's transaction."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.store.entities import refresh_entity_counts

# Columns a memory edit may set, with the SQL cast each value needs.
UNIT_COLUMNS = {
    "text": "text", "context": "text", "fact_type": "text", "occurred_start": "timestamptz",
    "occurred_end": "timestamptz", "mentioned_at": "timestamptz", "state": "text",
    "invalidation_reason": "text", "invalidated_at": "timestamptz", "token_count": "int", "tags": "text[]",
    "metadata": "jsonb",
}


async def lock_document_row(conn: asyncpg.Connection, bank_id: str, document_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM documents WHERE bank_id = $1 AND id = $2 FOR UPDATE", bank_id, document_id
    )


async def retag_document(
    conn: asyncpg.Connection, bank_id: str, document_id: str, *, tags: list[str] | None, scopes: Any, set_scopes: bool
) -> list[uuid.UUID]:
    """Replace the document's tags and/or observation scopes and its facts' with them; returns the ids
    of the document's facts (not observations)."""
    await conn.execute(
        """
        UPDATE documents SET tags = coalesce($3::text[], tags),
               observation_scopes = CASE WHEN $5 THEN $4::jsonb ELSE observation_scopes END, updated_at = now()
        WHERE bank_id = $1 AND id = $2
        """,
        bank_id, document_id, tags, scopes, set_scopes,
    )
    rows = await conn.fetch(
        """
        UPDATE memory_units SET tags = coalesce($3::text[], tags),
               observation_scopes = CASE WHEN $5 THEN $4::jsonb ELSE observation_scopes END, updated_at = now()
        WHERE bank_id = $1 AND document_id = $2 AND fact_type <> 'observation'
        RETURNING id
        """,
        bank_id, document_id, tags, scopes, set_scopes,
    )
    return [row["id"] for row in rows]


async def observations_citing(conn: asyncpg.Connection, bank_id: str, fact_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT id FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'"
        " AND source_memory_ids && $2::uuid[]",
        bank_id, fact_ids,
    )
    return [row["id"] for row in rows]


async def update_unit(
    conn: asyncpg.Connection, unit_id: uuid.UUID, changes: dict[str, Any], embedding: Any | None
) -> bool:
    """Set the given columns (keys of UNIT_COLUMNS), the new vector when there is one, and edited_at;
    False when the unit is gone (deleted since the caller read it)."""
    sets, args = [], [unit_id]
    for column, value in changes.items():
        args.append(value)
        sets.append(f"{column} = ${len(args)}::{UNIT_COLUMNS[column]}")
    if embedding is not None:
        args.append("[" + ",".join(f"{float(x):.6g}" for x in embedding) + "]")
        sets.append(f"embedding = ${len(args)}::vector")
    sets += ["edited_at = now()", "updated_at = now()"]
    status = await conn.execute(f"UPDATE memory_units SET {', '.join(sets)} WHERE id = $1", *args)
    if status == "UPDATE 0":
        return False
    if embedding is not None:  # the sentence vectors described the old wording
        await conn.execute("DELETE FROM memory_unit_sentences WHERE unit_id = $1", unit_id)
    return True


async def detach_entities(conn: asyncpg.Connection, unit_id: uuid.UUID) -> None:
    """Forget the unit's entity mentions (before new ones are stored) and recount the entities."""
    rows = await conn.fetch("DELETE FROM unit_entities WHERE unit_id = $1 RETURNING entity_id", unit_id)
    await refresh_entity_counts(conn, [unit_id] * len(rows), [row["entity_id"] for row in rows])
