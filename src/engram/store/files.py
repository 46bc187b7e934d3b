"""Stored files (migrations 011 and 030): transfer archives waiting to be downloaded or imported, and
uploads waiting to be retained, kept in PostgreSQL itself and addressed by a key such as
`banks/<bank>/exports/<uuid>/transfer.zip`. The bytes are kept in parts of PART_BYTES: a file may pass
PostgreSQL's 1 GB limit for one value, and readers and writers hold one part at a time."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import IO

import asyncpg

from engram.store.tx import Conn, transaction

PART_BYTES = 8 * 1024 * 1024
_INFO = "key, bank_id, media_type, filename, byte_size, created_at"


async def put(conn: Conn, key: str, bank_id: str, data: bytes, *, media_type: str, filename: str | None) -> None:
    await put_file(conn, key, bank_id, io.BytesIO(data), media_type=media_type, filename=filename)


async def put_file(
    conn: Conn, key: str, bank_id: str, source: IO[bytes], *, media_type: str, filename: str | None,
    part_bytes: int = PART_BYTES,
) -> int:
    """`source`'s bytes from where it stands to its end, stored under `key` (replacing what was there)
    in one transaction; the file is read a part at a time on a thread. Returns the byte size."""
    async with transaction(conn) as tx:
        await tx.execute("DELETE FROM stored_files WHERE key = $1", key)
        await tx.execute(
            "INSERT INTO stored_files (key, bank_id, media_type, filename, byte_size) VALUES ($1, $2, $3, $4, 0)",
            key, bank_id, media_type, filename,
        )
        size = part = 0
        while chunk := await asyncio.to_thread(source.read, part_bytes):
            await tx.execute("INSERT INTO stored_file_parts (key, part, data) VALUES ($1, $2, $3)", key, part, chunk)
            size, part = size + len(chunk), part + 1
        await tx.execute("UPDATE stored_files SET byte_size = $2 WHERE key = $1", key, size)
    return size


async def info(conn: Conn, key: str) -> asyncpg.Record | None:
    """The file's key, bank_id, media_type, filename, byte_size and created_at (no bytes); None: absent."""
    return await conn.fetchrow(f"SELECT {_INFO} FROM stored_files WHERE key = $1", key)


async def parts(conn: Conn, key: str) -> AsyncIterator[bytes]:
    """The file's bytes a part at a time, each read by its own query (a pool's connection is held only
    while one part is read). Stops early if the file is deleted meanwhile."""
    part = -1
    while row := await conn.fetchrow(
        "SELECT part, data FROM stored_file_parts WHERE key = $1 AND part > $2 ORDER BY part LIMIT 1", key, part,
    ):
        part = row["part"]
        yield row["data"]


async def read(conn: Conn, key: str) -> bytes | None:
    """The whole file in memory (small uploads); None: absent."""
    if await info(conn, key) is None:
        return None
    return b"".join([chunk async for chunk in parts(conn, key)])


async def copy_to(conn: Conn, key: str, target: IO[bytes]) -> int:
    """The file written into `target` a part at a time (the writes on a thread); returns the bytes written."""
    written = 0
    async for chunk in parts(conn, key):
        await asyncio.to_thread(target.write, chunk)
        written += len(chunk)
    return written


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
