"""Read queries for the entity API: listing, one entity in detail, the co-occurrence graph and the
memory graph."""

from __future__ import annotations

import uuid

import asyncpg

from engram.store.sql import SqlParams, like_pattern, tags_condition
from engram.store.tx import Conn


def _tag_scope(params: SqlParams, tags: list[str] | None, tags_match: str) -> str:
    """Entities mentioned by at least one memory that passes the tag filter ('TRUE' without tags)."""
    condition = tags_condition(params, tags, tags_match)
    if condition == "TRUE":
        return "TRUE"
    return (
        "EXISTS (SELECT 1 FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id"
        f" WHERE ue.entity_id = e.id AND {condition})"
    )


async def list_entities(
    conn: Conn, bank_id: str, *, q: str | None, tags: list[str] | None, tags_match: str, sort: str,
    limit: int, offset: int, entity_type: str | None = None,
) -> tuple[list[asyncpg.Record], int]:
    params = SqlParams()
    parts = [f"e.bank_id = {params.add(bank_id)}", _tag_scope(params, tags, tags_match)]
    if entity_type:
        parts.append(f"e.entity_type = {params.add(entity_type)}")
    if q:
        ref = params.add(like_pattern(q))
        parts.append(
            f"(e.canonical_name ILIKE {ref} OR EXISTS (SELECT 1 FROM unit_entities ua"
            f" WHERE ua.entity_id = e.id AND ua.mention ILIKE {ref}))"
        )
    order = {"name": "lower(e.canonical_name)", "recent": "e.last_seen DESC"}.get(sort, "e.mention_count DESC")
    rows = await conn.fetch(
        f"""
        SELECT e.*, count(*) OVER () AS total FROM entities e WHERE {" AND ".join(parts)}
        ORDER BY {order}, e.canonical_name LIMIT {params.add(limit)} OFFSET {params.add(offset)}
        """,
        *params.values,
    )
    return rows, (rows[0]["total"] if rows else 0)


async def get_entity(conn: Conn, bank_id: str, entity_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow(
        """
        SELECT e.*,
               ARRAY(SELECT DISTINCT ua.mention FROM unit_entities ua
                     WHERE ua.entity_id = e.id AND ua.mention IS NOT NULL ORDER BY 1) AS aliases
        FROM entities e WHERE e.bank_id = $1 AND e.id = $2
        """,
        bank_id,
        entity_id,
    )


async def entity_facts(
    conn: Conn, entity_id: uuid.UUID, *, tags: list[str] | None, tags_match: str, limit: int
) -> list[asyncpg.Record]:
    params = SqlParams()
    ref = params.add(entity_id)
    condition = tags_condition(params, tags, tags_match)
    return await conn.fetch(
        f"""
        SELECT m.id, m.text, m.fact_type, m.mentioned_at, m.occurred_start, m.tags, m.document_id, ue.mention
        FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
        WHERE ue.entity_id = {ref} AND {condition}
        ORDER BY coalesce(m.occurred_start, m.mentioned_at, m.created_at) DESC
        LIMIT {params.add(limit)}
        """,
        *params.values,
    )


async def cooccurring(conn: Conn, entity_id: uuid.UUID, limit: int) -> list[asyncpg.Record]:
    return await conn.fetch(
        """
        SELECT e.id, e.canonical_name, c.count, c.last_cooccurred
        FROM entity_cooccurrences c
        JOIN entities e ON e.id = CASE WHEN c.entity_a = $1 THEN c.entity_b ELSE c.entity_a END
        WHERE c.entity_a = $1 OR c.entity_b = $1
        ORDER BY c.count DESC, e.canonical_name LIMIT $2
        """,
        entity_id,
        limit,
    )


async def entity_graph(
    conn: Conn, bank_id: str, *, limit: int, min_count: int, tags: list[str] | None, tags_match: str,
    edge_limit: int,
) -> tuple[list[asyncpg.Record], list[asyncpg.Record], int, int]:
    """The `limit` most mentioned entities and the `edge_limit` strongest co-occurrence edges among them
    (count ≥ min_count); the totals count every node and edge."""
    params = SqlParams()
    scope = _tag_scope(params, tags, tags_match)
    bank = params.add(bank_id)
    nodes = await conn.fetch(
        f"""
        SELECT e.id, e.canonical_name, e.mention_count, count(*) OVER () AS total
        FROM entities e WHERE e.bank_id = {bank} AND {scope}
        ORDER BY e.mention_count DESC, e.canonical_name LIMIT {params.add(limit)}
        """,
        *params.values,
    )
    ids = [n["id"] for n in nodes]
    edges = await conn.fetch(
        """
        SELECT entity_a, entity_b, count, last_cooccurred, count(*) OVER () AS total
        FROM entity_cooccurrences
        WHERE entity_a = ANY($1::uuid[]) AND entity_b = ANY($1::uuid[]) AND count >= $2
        ORDER BY count DESC, entity_a, entity_b LIMIT $3
        """,
        ids,
        min_count,
        edge_limit,
    )
    return nodes, edges, (nodes[0]["total"] if nodes else 0), (edges[0]["total"] if edges else 0)


async def memory_graph(
    conn: Conn, bank_id: str, *, fact_type: str | None, q: str | None, tags: list[str] | None, tags_match: str,
    document_id: str | None, chunk_id: str | None, limit: int, edge_limit: int,
) -> tuple[list[asyncpg.Record], list[asyncpg.Record], int]:
    """Memory units (newest first) with at most `edge_limit` links among them: stored links first, then
    shared-entity edges (units sharing a popular entity pair up quadratically, so the limit matters)."""
    params = SqlParams()
    parts = [f"m.bank_id = {params.add(bank_id)}"]
    if fact_type:
        parts.append(f"m.fact_type = {params.add(fact_type)}")
    if q:
        parts.append(f"m.text ILIKE {params.add(like_pattern(q))}")
    if document_id:
        parts.append(f"m.document_id = {params.add(document_id)}")
    if chunk_id:
        parts.append(f"m.chunk_id = {params.add(chunk_id)}")
    condition = tags_condition(params, tags, tags_match)
    if condition != "TRUE":
        parts.append(condition)
    # The page is cut on ids first: with whole rows, the total (a window over every match) kept each
    # row, vector included, and named the entities of all of them before the limit (1.7 s at 100,000).
    units = await conn.fetch(
        f"""
        SELECT m.*, page.total,
               ARRAY(SELECT e.canonical_name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
                     WHERE ue.unit_id = m.id ORDER BY 1) AS entity_names
        FROM (SELECT m.id, count(*) OVER () AS total FROM memory_units m WHERE {" AND ".join(parts)}
              ORDER BY m.created_at DESC LIMIT {params.add(limit)}) page
        JOIN memory_units m ON m.id = page.id
        ORDER BY m.created_at DESC
        """,
        *params.values,
    )
    ids = [u["id"] for u in units]
    links = await conn.fetch(
        """
        SELECT from_unit AS source, to_unit AS target, link_type, weight, '' AS entity_name
        FROM memory_links WHERE from_unit = ANY($1::uuid[]) AND to_unit = ANY($1::uuid[])
        UNION ALL
        SELECT a.unit_id, b.unit_id, 'entity', 1.0, e.canonical_name
        FROM unit_entities a JOIN unit_entities b ON a.entity_id = b.entity_id AND a.unit_id < b.unit_id
        JOIN entities e ON e.id = a.entity_id
        WHERE a.unit_id = ANY($1::uuid[]) AND b.unit_id = ANY($1::uuid[])
        LIMIT $2
        """,
        ids,
        edge_limit,
    )
    return units, links, (units[0]["total"] if units else 0)
