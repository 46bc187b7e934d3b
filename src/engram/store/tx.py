"""Transactions over either a pool or a connection, so query functions accept both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg

Conn = asyncpg.Connection | asyncpg.Pool


class transaction:
    """`async with _transaction(pool_or_conn) as conn`: a transaction on a connection of the pool."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn
        self._acquired: Any = None
        self._tx: Any = None

    async def __aenter__(self) -> asyncpg.Connection:
        conn = self._conn
        if isinstance(conn, asyncpg.Pool):
            self._acquired = conn.acquire()
            conn = await self._acquired.__aenter__()
        self._tx = conn.transaction()
        await self._tx.__aenter__()
        return conn

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._tx.__aexit__(*exc)
        finally:
            if self._acquired is not None:
                await self._acquired.__aexit__(*exc)


async def batches_of(
    conn: asyncpg.Connection, size: int, query: str, *args: Any
) -> AsyncIterator[list[asyncpg.Record]]:
    """A query's rows `size` at a time from a cursor in the open transaction: the cursor reads the rows
    as they were when it opened and resumes where it stopped, however the transaction changes them."""
    cursor = await conn.cursor(query, *args)
    while rows := await cursor.fetch(size):
        yield rows
