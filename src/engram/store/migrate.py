"""Applies the numbered SQL files in `migrations/` once each, under an advisory lock so that several
processes starting together (server, workers) never race."""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger("engram.store")

# An arbitrary constant: the advisory lock key that serialises migrations across processes.
MIGRATION_LOCK_KEY = 0x656E6772616D  # "engram"


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration shipped with the package, in order."""
    found = []
    for entry in resources.files("engram.store.migrations").iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:3].isdigit():
            found.append((int(name[:3]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row["version"] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            log.info("applied migration %s", name)
            applied_now.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now
