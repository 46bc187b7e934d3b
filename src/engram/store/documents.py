"""Queries on documents and their chunks."""

from __future__ import annotations

import asyncpg

from engram.store.memories import delete_units_where
from engram.store.sql import SqlParams, like_pattern, tags_condition
from engram.store.tx import Conn
from engram.store.writer_locks import writing_to_bank


async def list_documents(
    conn: Conn, bank_id: str, *, q: str | None, tags: list[str] | None, tags_match: str, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    params = SqlParams()
    where = _documents_where(params, bank_id, q, tags, tags_match)
    # The page is cut on narrow rows, then its documents' facts are counted: counted in the same select,
    # the total (a window over every match) had them counted for every document of the bank (~90 ms a
    # page at 100,000 documents, ~300 ms deep in the list).
    rows = await conn.fetch(
        f"""
        SELECT d.id, d.bank_id, d.content_hash, d.created_at, d.updated_at, d.tags, d.metadata, d.retain_params,
               coalesce(length(d.original_text), 0) AS text_length,
               (SELECT count(*) FROM memory_units m WHERE m.bank_id = d.bank_id AND m.document_id = d.id)
                   AS memory_unit_count,
               page.total
        FROM (SELECT d.bank_id, d.id, count(*) OVER () AS total FROM documents d WHERE {where}
              ORDER BY d.updated_at DESC, d.id LIMIT {params.add(limit)} OFFSET {params.add(offset)}) page
        JOIN documents d ON d.bank_id = page.bank_id AND d.id = page.id
        ORDER BY d.updated_at DESC, d.id
        """,
        *params.values,
    )
    if rows:
        return rows, rows[0]["total"]
    count_params = SqlParams()  # a page past the end still reports how many there are
    count_where = _documents_where(count_params, bank_id, q, tags, tags_match)
    return rows, await conn.fetchval(f"SELECT count(*) FROM documents d WHERE {count_where}", *count_params.values)


def _documents_where(params: SqlParams, bank_id: str, q: str | None, tags: list[str] | None, tags_match: str) -> str:
    parts = [f"d.bank_id = {params.add(bank_id)}"]
    if q:
        ref = params.add(like_pattern(q))
        parts.append(f"(d.id ILIKE {ref} OR d.original_text ILIKE {ref})")
    condition = tags_condition(params, tags, tags_match, column="d.tags")
    if condition != "TRUE":
        parts.append(condition)
    return " AND ".join(parts)


async def get_document(conn: Conn, bank_id: str, document_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        """
        SELECT d.*,
               (SELECT count(*) FROM memory_units m WHERE m.bank_id = d.bank_id AND m.document_id = d.id)
                   AS memory_unit_count,
               (SELECT coalesce(jsonb_object_agg(fact_type, n), '{}') FROM
                  (SELECT fact_type, count(*) n FROM memory_units m
                   WHERE m.bank_id = d.bank_id AND m.document_id = d.id GROUP BY 1) t) AS by_type
        FROM documents d WHERE d.bank_id = $1 AND d.id = $2
        """,
        bank_id,
        document_id,
    )


async def delete_document(conn: Conn, bank_id: str, document_id: str, *, import_wait: float | None) -> int | None:
    """Delete a document with its chunks and facts; None when there is no such document. While an
    import holds the bank, waits for it (given the pool, without a connection: `writing_to_bank`)."""
    async with writing_to_bank(conn, bank_id, import_wait, make_bank=False, undone="deleted") as tx:
        exists = await tx.fetchval("SELECT 1 FROM documents WHERE bank_id = $1 AND id = $2", bank_id, document_id)
        if exists is None:
            return None
        deleted = await delete_units_where(tx, "m.bank_id = $1 AND m.document_id = $2", bank_id, document_id)
        await tx.execute("DELETE FROM documents WHERE bank_id = $1 AND id = $2", bank_id, document_id)
        return len(deleted)


async def list_chunks(
    conn: Conn, bank_id: str, document_id: str, *, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        """
        SELECT *, count(*) OVER () AS total FROM chunks WHERE bank_id = $1 AND document_id = $2
        ORDER BY chunk_index LIMIT $3 OFFSET $4
        """,
        bank_id,
        document_id,
        limit,
        offset,
    )
    return rows, (rows[0]["total"] if rows else 0)


async def get_chunk(conn: Conn, chunk_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM chunks WHERE id = $1", chunk_id)
