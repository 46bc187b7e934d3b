"""Queries on mental models (with their history) and directives."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from engram.store.sql import SqlParams, tags_condition
from engram.store.storable import storable_text
from engram.store.tx import Conn

MODEL_HISTORY_LIMIT = 50


def _vector(vector: Any) -> str | None:
    if vector is None:
        return None
    return "[" + ",".join(f"{float(x):.6g}" for x in vector) + "]"


async def insert_mental_model(
    conn: Conn, bank_id: str, model_id: str, *, name: str, source_query: str, tags: list[str], max_tokens: int,
    trigger: dict[str, Any], vector: Any,
) -> asyncpg.Record | None:
    """None when the id is taken."""
    return await conn.fetchrow(
        """
        INSERT INTO mental_models (bank_id, id, name, source_query, tags, max_tokens, trigger, embedding)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8::vector)
        ON CONFLICT DO NOTHING RETURNING *
        """,
        bank_id, model_id, name, source_query, tags, max_tokens, trigger, _vector(vector),
    )


async def update_mental_model(conn: Conn, bank_id: str, model_id: str, changes: dict[str, Any]) -> asyncpg.Record | None:
    allowed = {"name", "source_query", "tags", "max_tokens", "trigger", "embedding"}
    params = SqlParams()
    sets = []
    for column, value in changes.items():
        if column not in allowed:
            raise ValueError(column)
        cast = "::vector" if column == "embedding" else ""
        sets.append(f"{column} = {params.add(_vector(value) if column == 'embedding' else value)}{cast}")
    where = f"bank_id = {params.add(bank_id)} AND id = {params.add(model_id)}"
    if not sets:
        return await conn.fetchrow(f"SELECT * FROM mental_models WHERE {where}", *params.values)
    return await conn.fetchrow(
        f"UPDATE mental_models SET {', '.join(sets)}, updated_at = now() WHERE {where} RETURNING *", *params.values
    )


async def get_mental_model(conn: Conn, bank_id: str, model_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT m.*, {STALE} AS is_stale FROM mental_models m WHERE m.bank_id = $1 AND m.id = $2", bank_id, model_id
    )


# A model is stale when a memory in its scope (any of its tags; every memory when it has none)
# arrived after the newest memory its last refresh saw.
STALE = """(m.last_refreshed_at IS NOT NULL AND EXISTS (
    SELECT 1 FROM memory_units u WHERE u.bank_id = m.bank_id
      AND u.created_at > coalesce(m.last_memory_seen_at, m.last_refreshed_at)
      AND (cardinality(m.tags) = 0 OR u.tags && m.tags)))"""


async def list_mental_models(
    conn: Conn, bank_id: str, *, tags: list[str] | None, tags_match: str, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    params = SqlParams()
    condition = tags_condition(params, tags, tags_match, column="m.tags")
    rows = await conn.fetch(
        f"""
        SELECT m.*, {STALE} AS is_stale, count(*) OVER () AS total FROM mental_models m
        WHERE m.bank_id = {params.add(bank_id)} AND {condition}
        ORDER BY m.created_at, m.id LIMIT {params.add(limit)} OFFSET {params.add(offset)}
        """,
        *params.values,
    )
    return rows, (rows[0]["total"] if rows else 0)


async def search_mental_models(
    conn: Conn, bank_id: str, vector: Any, *, tags: list[str] | None, tags_match: str, exclude: list[str], limit: int
) -> list[asyncpg.Record]:
    params = SqlParams()
    condition = tags_condition(params, tags, tags_match, column="m.tags")
    ref = params.add(_vector(vector))
    return await conn.fetch(
        f"""
        SELECT m.*, {STALE} AS is_stale, 1 - (m.embedding <=> {ref}::vector) AS similarity FROM mental_models m
        WHERE m.bank_id = {params.add(bank_id)} AND {condition} AND m.content IS NOT NULL
          AND NOT (m.id = ANY({params.add(exclude)}::text[]))
        ORDER BY m.embedding <=> {ref}::vector LIMIT {params.add(limit)}
        """,
        *params.values,
    )


async def delete_mental_model(conn: Conn, bank_id: str, model_id: str) -> bool:
    status = await conn.execute("DELETE FROM mental_models WHERE bank_id = $1 AND id = $2", bank_id, model_id)
    return status.endswith(" 1")


async def store_refresh(
    conn: asyncpg.Connection, bank_id: str, model_id: str, *, content: str, reflect_response: dict[str, Any],
    memory_seen_at: datetime | None,
) -> None:
    """Keep the current content in history (≤ 50 versions), then write the new one."""
    await conn.execute(
        """
        INSERT INTO mental_model_history (bank_id, mental_model_id, content, refreshed_at)
        SELECT bank_id, id, content, last_refreshed_at FROM mental_models
        WHERE bank_id = $1 AND id = $2 AND content IS NOT NULL
        """,
        bank_id, model_id,
    )
    await conn.execute(
        """
        DELETE FROM mental_model_history WHERE bank_id = $1 AND mental_model_id = $2 AND id NOT IN (
            SELECT id FROM mental_model_history WHERE bank_id = $1 AND mental_model_id = $2
            ORDER BY replaced_at DESC, id DESC LIMIT $3)
        """,
        bank_id, model_id, MODEL_HISTORY_LIMIT,
    )
    await conn.execute(
        """
        UPDATE mental_models SET content = $3, reflect_response = $4, last_refreshed_at = now(),
               last_memory_seen_at = $5, last_refresh_failed_at = NULL, last_refresh_error = NULL, updated_at = now()
        WHERE bank_id = $1 AND id = $2
        """,
        bank_id, model_id, content, reflect_response, memory_seen_at,
    )


async def record_refresh_failure(conn: Conn, bank_id: str, model_id: str, reason: str) -> None:
    await conn.execute(
        "UPDATE mental_models SET last_refresh_failed_at = now(), last_refresh_error = $3 WHERE bank_id = $1 AND id = $2",
        bank_id, model_id, storable_text(reason[:2000]),
    )


async def clear_mental_model(conn: Conn, bank_id: str, model_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "UPDATE mental_models SET content = NULL, reflect_response = NULL, last_refreshed_at = NULL,"
        " last_memory_seen_at = NULL, updated_at = now() WHERE bank_id = $1 AND id = $2 RETURNING *",
        bank_id, model_id,
    )


async def mental_model_history(conn: Conn, bank_id: str, model_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT content, refreshed_at, replaced_at FROM mental_model_history"
        " WHERE bank_id = $1 AND mental_model_id = $2 ORDER BY replaced_at DESC, id DESC",
        bank_id, model_id,
    )


async def newest_memory_in_scope(conn: Conn, bank_id: str, tags: list[str]) -> datetime | None:
    return await conn.fetchval(
        "SELECT max(created_at) FROM memory_units WHERE bank_id = $1 AND (cardinality($2::text[]) = 0 OR tags && $2)",
        bank_id, tags,
    )


async def models_to_refresh_after_consolidation(conn: Conn, bank_id: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT id FROM mental_models WHERE bank_id = $1 AND (trigger->>'refresh_after_consolidation')::boolean",
        bank_id,
    )
    return [row["id"] for row in rows]


async def models_with_cron(conn: Conn) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT bank_id, id, trigger->>'refresh_cron' AS cron, last_refreshed_at FROM mental_models"
        " WHERE coalesce(trigger->>'refresh_cron', '') <> ''"
    )


# --- directives --------------------------------------------------------------------------------


async def insert_directive(conn: Conn, bank_id: str, **fields: Any) -> asyncpg.Record:
    return await conn.fetchrow(
        """
        INSERT INTO directives (id, bank_id, name, content, priority, is_active, tags)
        VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *
        """,
        uuid.uuid4(), bank_id, fields["name"], fields["content"], fields["priority"], fields["is_active"],
        fields["tags"],
    )


async def update_directive(conn: Conn, bank_id: str, directive_id: uuid.UUID, changes: dict[str, Any]) -> asyncpg.Record | None:
    allowed = {"name", "content", "priority", "is_active", "tags"}
    params = SqlParams()
    sets = [f"{column} = {params.add(value)}" for column, value in changes.items() if column in allowed]
    where = f"bank_id = {params.add(bank_id)} AND id = {params.add(directive_id)}"
    if not sets:
        return await conn.fetchrow(f"SELECT * FROM directives WHERE {where}", *params.values)
    return await conn.fetchrow(
        f"UPDATE directives SET {', '.join(sets)}, updated_at = now() WHERE {where} RETURNING *", *params.values
    )


async def get_directive(conn: Conn, bank_id: str, directive_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM directives WHERE bank_id = $1 AND id = $2", bank_id, directive_id)


async def delete_directive(conn: Conn, bank_id: str, directive_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM directives WHERE bank_id = $1 AND id = $2", bank_id, directive_id)
    return status.endswith(" 1")


async def list_directives(
    conn: Conn, bank_id: str, *, tags: list[str] | None, tags_match: str, active_only: bool, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    params = SqlParams()
    condition = tags_condition(params, tags, tags_match, column="d.tags")
    rows = await conn.fetch(
        f"""
        SELECT d.*, count(*) OVER () AS total FROM directives d
        WHERE d.bank_id = {params.add(bank_id)} AND {condition} AND (NOT {params.add(active_only)} OR d.is_active)
        ORDER BY d.priority DESC, d.created_at LIMIT {params.add(limit)} OFFSET {params.add(offset)}
        """,
        *params.values,
    )
    return rows, (rows[0]["total"] if rows else 0)
