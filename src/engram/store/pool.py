"""The connection pool: opens the configured PostgreSQL (or starts the embedded one), applies
migrations, and teaches asyncpg the pgvector type."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg
import numpy as np

from engram.errors import StoreUnavailable
from engram.store.migrate import apply_migrations

if TYPE_CHECKING:
    from engram.settings import Settings
    from engram.store.embedded import EmbeddedPostgres
    from engram.store.supervisor import PostgresSupervisor

log = logging.getLogger("engram.store")


_VECTOR_HEADER = struct.Struct(">HH")  # pgvector's binary form: dimensions, a reserved 0, then float4s


def encode_vector(value: object) -> bytes:
    """A vector in pgvector's binary form. Sent as text it cost ~1 ms of formatting per 384-dim
    vector: two or three per recall, one per stored fact and sentence. Bytes are taken as already
    encoded: elements of a `vector[]` parameter must be (asyncpg would take an array for a dimension)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):  # the text form, '[0.1,0.2,…]'
        value = decode_text_vector(value)
    array = np.asarray(value, dtype=">f4").ravel()
    return _VECTOR_HEADER.pack(array.size, 0) + array.tobytes()


def decode_vector(data: bytes) -> np.ndarray:
    dimensions, _ = _VECTOR_HEADER.unpack_from(data)
    return np.frombuffer(data, dtype=">f4", count=dimensions, offset=_VECTOR_HEADER.size).astype(np.float32)


def decode_text_vector(text: str) -> np.ndarray:
    return np.array(text.strip()[1:-1].split(","), dtype=np.float32)


# Given at connection start, these are the session's defaults for the connection's whole life.
# - Filtered HNSW searches (one bank among many) keep scanning until enough rows pass the filter.
# - No JIT compilation. A PostgreSQL built with LLVM (most packaged and managed ones; not the embedded
#   one) compiles every statement the planner costs above 100,000, with inlining and optimisation above
#   500,000. At 100,000 memories PostgreSQL 18 costs the graph arm's statement ~816,000 (its link
#   lookups, which read a few rows each). Compiled that way it took ~470 ms instead of 8 (PostgreSQL 15
#   with LLVM, the scale bank's tables copied, EXPLAIN ANALYZE). Engram's statements are index lookups
#   and small joins: compiling them never pays.
SESSION_SETTINGS = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "100", "jit": "off"}


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "vector", schema="public", encoder=encode_vector, decoder=decode_vector, format="binary"
    )
    await conn.set_type_codec("jsonb", schema="pg_catalog", encoder=_dumps, decoder=_loads, format="text")
    await conn.set_type_codec("json", schema="pg_catalog", encoder=_dumps, decoder=_loads, format="text")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """What the pool does to a released connection besides rolling back an open transaction (asyncpg
    always does that): nothing. asyncpg's default ran `SELECT pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL` — one more round trip on every release, seven in a recall. Engram changes
    no session state it does not undo itself: settings are `SET LOCAL` (transaction-scoped), the two
    session advisory locks (mental-model refresh, ANALYZE) are released in `finally`, cursors live in
    transactions, nothing LISTENs."""


def _dumps(value: object) -> str:
    import json

    return json.dumps(value, default=str)


def _loads(text: str) -> object:
    import json

    return json.loads(text)


@dataclass
class Store:
    """A migrated database and its pool. `embedded` is set when Engram started PostgreSQL itself, and
    `supervisor` then restarts it if it dies."""

    pool: asyncpg.Pool
    dsn: str
    embedded: EmbeddedPostgres | None = None
    supervisor: PostgresSupervisor | None = None

    async def close(self) -> None:
        if self.supervisor is not None:
            await self.supervisor.stop()
        await self.pool.close()
        if self.embedded is not None:
            self.embedded.stop()


async def open_store(settings: Settings, *, min_size: int = 2, max_size: int = 20,
                     check_embedding_model: bool = True) -> Store:
    """Connect to `settings.database_url`, or start the embedded server under `settings.home`; refuse
    a database whose vectors another embedding model made (unless `check_embedding_model` is off, for
    `engram reembed`).

    A configured URL that is wrong or unreachable is an error: it never falls back to the embedded
    server, so data can't silently land in the wrong place.
    """
    embedded = None
    dsn = settings.database_url
    if dsn is None:
        from engram.store.embedded import EmbeddedPostgres

        embedded = EmbeddedPostgres(settings.home)
        dsn = embedded.start()
    elif not dsn.startswith(("postgresql://", "postgres://")):
        raise StoreUnavailable(
            f"ENGRAM_DATABASE_URL must start with postgresql:// (got {redact_dsn(dsn)!r})"
        )
    try:
        conn = await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        if embedded is not None:
            embedded.stop()
        raise StoreUnavailable(f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {exc}") from exc
    try:
        await apply_migrations(conn)
        if check_embedding_model:
            await _claim_embedding_model(conn, settings.embedding_model)
    except BaseException:
        await conn.close()
        if embedded is not None:  # a refused start leaves no PostgreSQL running
            embedded.stop()
        raise
    await conn.close()
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection, command_timeout=300,
        server_settings=SESSION_SETTINGS, reset=_keep_session,
    )
    store = Store(pool=pool, dsn=dsn, embedded=embedded)
    if embedded is not None:
        from engram.store.supervisor import PostgresSupervisor

        store.supervisor = PostgresSupervisor(embedded, pool)
        store.supervisor.start()
    return store


async def _claim_embedding_model(conn: asyncpg.Connection, name: str) -> None:
    from engram.models.embedder import embedding_model
    from engram.store.embedding_model import claim_model

    model = embedding_model(name)
    await claim_model(conn, model.name, model.dimensions)


# What a database that is restarting, shutting down or out of reach raises.
UNAVAILABLE = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
)


# What asyncpg's InterfaceError says when the connection or the pool under an operation is gone, e.g.
# "cannot call Transaction.rollback(): the underlying connection is closed" after the server went away
# mid-transaction, or "pool is closing" during shutdown. Other InterfaceErrors are misuse: a 500.
_GONE = ("connection is closed", "connection was closed", "pool is closing", "pool is closed")


def is_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached right now (worth retrying later): asyncpg's
    connection errors, an InterfaceError about a closed connection or pool, an OS error (refused, no
    socket, timeout) raised while asyncpg connected, or an InterfaceError raised while handling one."""
    if isinstance(exc, UNAVAILABLE):
        return True
    if isinstance(exc, asyncpg.InterfaceError):
        if any(words in str(exc) for words in _GONE):
            return True
        cause = exc.__cause__ or exc.__context__
        return cause is not None and cause is not exc and is_unavailable(cause)
    return isinstance(exc, OSError) and _raised_in_asyncpg(exc)


def _raised_in_asyncpg(exc: BaseException) -> bool:
    import traceback

    return any("asyncpg" in frame.filename for frame in traceback.extract_tb(exc.__traceback__))


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced, for error messages and logs."""
    import re

    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
