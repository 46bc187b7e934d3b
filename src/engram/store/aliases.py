"""Queries on `bank_aliases`: resolve an id that may be an alias, and manage a bank's aliases."""

from __future__ import annotations

from typing import Any

import asyncpg

from engram.store.tx import Conn


async def resolve(conn: Conn, name: str) -> str | None:
    """The bank `name` is an alias of, or None when it is not an alias."""
    return await conn.fetchval("SELECT bank_id FROM bank_aliases WHERE alias = $1", name)


async def resolve_with_config(conn: Conn, name: str) -> tuple[str | None, bool, dict[str, Any] | None]:
    """`resolve`, and in the same round trip the bank's row: (the bank `name` is an alias of or None,
    whether that bank (or `name` itself) exists, its `config`)."""
    row = await conn.fetchrow(
        """
        SELECT a.bank_id AS alias_of, b.bank_id IS NOT NULL AS found, b.config
        FROM (SELECT $1::text AS name) asked
        LEFT JOIN bank_aliases a ON a.alias = asked.name
        LEFT JOIN banks b ON b.bank_id = coalesce(a.bank_id, asked.name)
        """,
        name,
    )
    return row["alias_of"], row["found"], row["config"]


async def list_aliases(conn: Conn, bank_id: str) -> list[asyncpg.Record]:
    """The bank's aliases, the primary one first, then oldest first."""
    return await conn.fetch(
        "SELECT alias, is_primary FROM bank_aliases WHERE bank_id = $1 ORDER BY is_primary DESC, created_at, alias",
        bank_id,
    )


async def name_taken(conn: Conn, name: str) -> str | None:
    """'bank' or 'alias' when `name` already names one, else None."""
    return await conn.fetchval(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM banks WHERE bank_id = $1) THEN 'bank'"
        " WHEN EXISTS (SELECT 1 FROM bank_aliases WHERE alias = $1) THEN 'alias' END",
        name,
    )


async def create_alias(conn: asyncpg.Connection, bank_id: str, alias: str, primary: bool) -> None:
    if primary:
        await conn.execute("UPDATE bank_aliases SET is_primary = false WHERE bank_id = $1 AND is_primary", bank_id)
    await conn.execute(
        "INSERT INTO bank_aliases (alias, bank_id, is_primary) VALUES ($1, $2, $3)", alias, bank_id, primary
    )


async def set_primary(conn: asyncpg.Connection, bank_id: str, alias: str, primary: bool) -> bool:
    """Make `alias` the bank's primary (demoting the one before) or not; False when it has no such alias."""
    if await conn.fetchval("SELECT 1 FROM bank_aliases WHERE bank_id = $1 AND alias = $2", bank_id, alias) is None:
        return False
    if primary:
        await conn.execute(
            "UPDATE bank_aliases SET is_primary = false WHERE bank_id = $1 AND is_primary AND alias <> $2",
            bank_id, alias,
        )
    await conn.execute("UPDATE bank_aliases SET is_primary = $3 WHERE bank_id = $1 AND alias = $2",
                       bank_id, alias, primary)
    return True


async def delete_alias(conn: Conn, bank_id: str, alias: str) -> bool:
    result = await conn.execute("DELETE FROM bank_aliases WHERE bank_id = $1 AND alias = $2", bank_id, alias)
    return result != "DELETE 0"


async def display_aliases(conn: Conn, bank_ids: list[str]) -> dict[str, str]:
    """The primary alias of each bank that has one."""
    rows = await conn.fetch(
        "SELECT bank_id, alias FROM bank_aliases WHERE bank_id = ANY($1::text[]) AND is_primary", bank_ids
    )
    return {row["bank_id"]: row["alias"] for row in rows}
