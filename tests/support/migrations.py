"""A database brought to an older schema, to test what a later migration does to rows written before it."""

from __future__ import annotations

import asyncpg

from engram.store.migrate import migration_files


async def migrate_before(conn: asyncpg.Connection, version: int) -> None:
    """Apply every migration older than `version`, recorded as `apply_migrations` records them."""
    await conn.execute(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())")
    for number, name, sql in migration_files():
        if number < version:
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", number, name)
