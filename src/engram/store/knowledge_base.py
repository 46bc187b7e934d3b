"""Queries on `kb_nodes`, the knowledge-base tree (pages joined with their mental models)."""

from __future__ import annotations

from typing import Any

import asyncpg

from engram.store.tx import Conn

NODE = """SELECT n.*, m.source_query, m.content, m.tags, m.last_refreshed_at, m.last_refresh_failed_at, m.trigger,
                 m.updated_at AS model_updated_at
          FROM kb_nodes n LEFT JOIN mental_models m ON m.bank_id = n.bank_id AND m.id = n.mental_model_id"""


async def insert_node(conn: Conn, bank_id: str, node_id: str, kind: str, name: str, parent_id: str | None,
                      mental_model_id: str | None = None) -> None:
    await conn.execute(
        "INSERT INTO kb_nodes (id, bank_id, kind, name, parent_id, mental_model_id) VALUES ($1, $2, $3, $4, $5, $6)",
        node_id, bank_id, kind, name, parent_id, mental_model_id,
    )


async def get_node(conn: Conn, bank_id: str, node_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(f"{NODE} WHERE n.bank_id = $1 AND n.id = $2", bank_id, node_id)


async def list_nodes(conn: Conn, bank_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(f"{NODE} WHERE n.bank_id = $1 ORDER BY n.kind, lower(n.name), n.id", bank_id)


async def subtree(conn: Conn, bank_id: str, node_id: str) -> list[asyncpg.Record]:
    """The node and everything under it."""
    return await conn.fetch(
        """
        WITH RECURSIVE below AS (
            SELECT id, mental_model_id FROM kb_nodes WHERE bank_id = $1 AND id = $2
            UNION ALL
            SELECT n.id, n.mental_model_id FROM kb_nodes n JOIN below b ON n.parent_id = b.id
        )
        SELECT * FROM below
        """,
        bank_id, node_id,
    )


async def update_node(conn: Conn, bank_id: str, node_id: str, name: str | None, parent_id: str | None,
                      move: bool) -> None:
    await conn.execute(
        "UPDATE kb_nodes SET name = coalesce($3, name), parent_id = CASE WHEN $5 THEN $4 ELSE parent_id END,"
        " updated_at = now() WHERE bank_id = $1 AND id = $2",
        bank_id, node_id, name, parent_id, move,
    )


async def delete_nodes(conn: Conn, bank_id: str, node_ids: list[str], model_ids: list[str]) -> None:
    await conn.execute("DELETE FROM kb_nodes WHERE bank_id = $1 AND id = ANY($2::text[])", bank_id, node_ids)
    await conn.execute("DELETE FROM mental_models WHERE bank_id = $1 AND id = ANY($2::text[])", bank_id, model_ids)


async def search_keyword(conn: Conn, bank_id: str, query: str, limit: int) -> list[asyncpg.Record]:
    return await conn.fetch(
        """
        SELECT n.id, ts_rank_cd(to_tsvector('english', n.name || ' ' || coalesce(m.content, '')),
                                plainto_tsquery('english', $2)) AS rank
        FROM kb_nodes n JOIN mental_models m ON m.bank_id = n.bank_id AND m.id = n.mental_model_id
        WHERE n.bank_id = $1 AND n.kind = 'page'
          AND to_tsvector('english', n.name || ' ' || coalesce(m.content, '')) @@ plainto_tsquery('english', $2)
        ORDER BY rank DESC, n.id LIMIT $3
        """,
        bank_id, query, limit,
    )


async def search_vector(conn: Conn, bank_id: str, vector: Any, limit: int) -> list[asyncpg.Record]:
    return await conn.fetch(
        """
        SELECT n.id FROM kb_nodes n JOIN mental_models m ON m.bank_id = n.bank_id AND m.id = n.mental_model_id
        WHERE n.bank_id = $1 AND n.kind = 'page' AND m.embedding IS NOT NULL
        ORDER BY m.embedding <=> $2::vector, n.id LIMIT $3
        """,
        bank_id, vector, limit,
    )
