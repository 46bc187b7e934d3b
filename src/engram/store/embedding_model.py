"""The database's embedding model (migration 016): recorded by the first server that starts on it, and
checked by every later one, so vectors of two models never end up compared with each other."""

from __future__ import annotations

import asyncpg

from engram.errors import EmbeddingModelError

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
                f"or give '{name}' a database of its own (banks exported from this one are re-embedded on import)")
        await record_model(conn, name, dimensions)
