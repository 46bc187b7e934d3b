"""Stored files (migration 011): transfer archives waiting to be downloaded or imported, kept as bytea
in PostgreSQL itself, addressed by a key such as `banks/<bank>/exports/<uuid>/transfer.zip`."""

from __future__ import annotations

import asyncpg

from engram.store.tx import Conn


async def put(conn: Conn, key: str, bank_id: str, data: bytes, *, media_type: str, filename: str | None) -> None:
    await conn.execute(
        """
        INSERT INTO stored_files (key, bank_id, media_type, filename, byte_size, data) VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (key) DO UPDATE SET data = excluded.data, byte_size = excluded.byte_size
        """,
        key, bank_id, media_type, filename, len(data), data,
    )


async def get(conn: Conn, key: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM stored_files WHERE key = $1", key)


async def delete(conn: Conn, key: str) -> None:
    await conn.execute("DELETE FROM stored_files WHERE key = $1", key)


async def forget_old_exports(conn: Conn, bank_id: str, keep_hours: float = 24) -> int:
    """Drop a bank's export archives older than `keep_hours` (they are downloads, not backups)."""
    status = await conn.execute(
        "DELETE FROM stored_files WHERE bank_id = $1 AND key LIKE 'banks/%/exports/%'"
        " AND created_at < now() - make_interval(secs => $2)",
        bank_id, keep_hours * 3600,
    )
    return int(status.split()[-1])
