"""Which directives apply to a reflect call: active ones, highest priority first; untagged directives
always apply, tagged ones only when the request's tags share a tag with them (or when the caller
asks for all of them)."""

from __future__ import annotations

import asyncpg


async def active_directives(
    pool: asyncpg.Pool, bank_id: str, request_tags: list[str] | None, apply_all: bool
) -> list[asyncpg.Record]:
    return await pool.fetch(
        """
        SELECT id, name, content, priority, tags FROM directives
        WHERE bank_id = $1 AND is_active
          AND ($3 OR cardinality(tags) = 0 OR tags && coalesce($2::text[], '{}'))
        ORDER BY priority DESC, created_at
        """,
        bank_id,
        request_tags,
        apply_all,
    )
