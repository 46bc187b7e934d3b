"""The database's embedding model (migration 016): recorded by the first server that starts on it, and
checked by every later one, so vectors of two models never end up compared with each other."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.errors import EmbeddingModelError
from engram.store.memories import ENTITY_NAMES
from engram.store.pool import encode_vector

# Every table with an `embedding` column; memory_unit_sentences rows only exist beside memory_units.
_HOLDS_VECTORS = """
    SELECT EXISTS (SELECT 1 FROM memory_units)
        OR EXISTS (SELECT 1 FROM mental_models WHERE embedding IS NOT NULL)
"""


async def recorded_model(conn: asyncpg.Connection) -> str | None:
    return await conn.fetchval("SELECT name FROM embedding_model")


async def record_model(conn: asyncpg.Connection, name: str, dimensions: int) -> None:
    await conn.execute(
        """
        INSERT INTO embedding_model (name, dimensions) VALUES ($1, $2)
        ON CONFLICT (only_row) DO UPDATE SET name = excluded.name, dimensions = excluded.dimensions,
                                             recorded_at = now()
        """,
        name, dimensions,
    )


async def claim_model(conn: asyncpg.Connection, name: str, dimensions: int) -> None:
    """Record `name` as the database's model, unless the database holds vectors of another one: then
    raise, naming both and the setting. One transaction, the row locked, so two processes starting
    together with different models cannot both win."""
    async with conn.transaction():
        await conn.execute("LOCK TABLE embedding_model IN EXCLUSIVE MODE")
        recorded = await recorded_model(conn)
        if recorded == name:
            return
        if recorded is not None and await conn.fetchval(_HOLDS_VECTORS):
            raise EmbeddingModelError(
                f"the database's memories were embedded with '{recorded}', but ENGRAM_EMBEDDING_MODEL is "
                f"'{name}': vectors of different models cannot be compared. Set ENGRAM_EMBEDDING_MODEL={recorded}, "
                f"or stop every server and run `ENGRAM_EMBEDDING_MODEL={name} engram reembed` to re-embed everything")
        await record_model(conn, name, dimensions)


# --- re-embedding (engram reembed) ----------------------------------------------------------------------


async def units_after(conn: asyncpg.Connection, after: uuid.UUID | None, limit: int) -> list[asyncpg.Record]:
    """Memory units of every bank in id order, after `after`: what their vectors are made from."""
    return await conn.fetch(
        f"""
        SELECT m.id, m.bank_id, m.text, m.fact_type, coalesce(m.occurred_start, m.mentioned_at) AS happened,
               {ENTITY_NAMES},
               EXISTS (SELECT 1 FROM memory_unit_sentences s WHERE s.unit_id = m.id) AS has_sentences
        FROM memory_units m
        WHERE $1::uuid IS NULL OR m.id > $1
        ORDER BY m.id LIMIT $2
        """,
        after, limit,
    )


async def write_unit_vectors(conn: asyncpg.Connection, ids: list[uuid.UUID], vectors: list[Any]) -> None:
    await conn.execute(
        """
        UPDATE memory_units m SET embedding = v.embedding
        FROM unnest($1::uuid[], $2::vector[]) AS v(id, embedding) WHERE m.id = v.id
        """,
        ids, [encode_vector(v) for v in vectors],
    )


async def replace_sentence_vectors(conn: asyncpg.Connection, unit_ids: list[uuid.UUID], owners: list[uuid.UUID],
                                   banks: list[str], vectors: list[Any]) -> None:
    """The sentence vectors of `unit_ids` become `vectors` (one per row of `owners`)."""
    await conn.execute("DELETE FROM memory_unit_sentences WHERE unit_id = ANY($1::uuid[])", unit_ids)
    await conn.execute(
        """
        INSERT INTO memory_unit_sentences (unit_id, bank_id, embedding)
        SELECT v.unit_id, v.bank_id, v.embedding FROM unnest($1::uuid[], $2::text[], $3::vector[])
            AS v(unit_id, bank_id, embedding)
        """,
        owners, banks, [encode_vector(v) for v in vectors],
    )


async def mental_models(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT bank_id, id, name, source_query FROM mental_models ORDER BY bank_id, id")


async def write_mental_model_vector(conn: asyncpg.Connection, bank_id: str, model_id: str, vector: Any) -> None:
    await conn.execute("UPDATE mental_models SET embedding = $3::vector WHERE bank_id = $1 AND id = $2",
                       bank_id, model_id, vector)
