"""A bank retained through the in-process library, then the store opened on it: for tests that call
store functions on real facts with real vectors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from engram import Memory
from engram.settings import Settings
from engram.store.pool import open_store


@asynccontextmanager
async def store_after_retaining(dsn: str, bank_id: str, texts: list[str] | tuple[str, ...], *,
                                pool_size: int = 1) -> AsyncIterator[asyncpg.Pool]:
    """The pool of a store opened on `dsn` once `texts` are retained into `bank_id` in one batch."""
    memory = Memory(database_url=dsn)
    try:
        memory.retain_batch(bank_id, [{"content": text} for text in texts])
    finally:
        memory.close()
    store = await open_store(Settings(database_url=dsn), min_size=pool_size, max_size=pool_size)
    try:
        yield store.pool
    finally:
        await store.close()
