"""Attachments (migration 011): the bytes of images and files retained as content blocks, and the
original of an uploaded file, kept as bytea next to the document they belong to."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

import asyncpg

from engram.store.tx import Conn

COLUMNS = ("id, bank_id, document_id, chunk_id, block_index, kind, role, media_type, filename, byte_size, sha256,"
           " created_at")


@dataclass
class NewAttachment:
    id: uuid.UUID
    document_id: str
    kind: str  # image | file
    media_type: str
    data: bytes
    role: str = "content"  # content | original (the uploaded file a document was converted from)
    block_index: int | None = None
    chunk_id: str | None = None
    filename: str | None = None
    text_offset: int | None = None


async def insert(conn: Conn, bank_id: str, rows: list[NewAttachment]) -> None:
    if not rows:
        return
    await conn.executemany(
        f"""
        INSERT INTO attachments ({COLUMNS.replace(', created_at', '')}, text_offset, data)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
        """,
        [(r.id, bank_id, r.document_id, r.chunk_id, r.block_index, r.kind, r.role, r.media_type, r.filename,
          len(r.data), hashlib.sha256(r.data).hexdigest(), r.text_offset, r.data) for r in rows],
    )


async def get(conn: Conn, bank_id: str, attachment_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM attachments WHERE bank_id = $1 AND id = $2", bank_id, attachment_id)


async def of_document(conn: Conn, bank_id: str, document_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {COLUMNS} FROM attachments WHERE bank_id = $1 AND document_id = $2"
        " ORDER BY role DESC, block_index NULLS LAST, created_at, id",
        bank_id, document_id,
    )


async def of_chunks(conn: Conn, chunk_ids: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {COLUMNS} FROM attachments WHERE chunk_id = ANY($1::text[]) ORDER BY block_index, id", chunk_ids
    )


async def delete_content_of(conn: Conn, bank_id: str, document_id: str) -> None:
    """Forget the content-block attachments of a document being replaced (its original file stays)."""
    await conn.execute(
        "DELETE FROM attachments WHERE bank_id = $1 AND document_id = $2 AND role = 'content'", bank_id, document_id
    )


async def offsets_of(conn: Conn, bank_id: str, document_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id, text_offset FROM attachments WHERE bank_id = $1 AND document_id = $2 AND text_offset IS NOT NULL",
        bank_id, document_id,
    )


async def set_chunks(conn: Conn, ids: list[uuid.UUID], chunk_ids: list[str | None]) -> None:
    await conn.execute(
        "UPDATE attachments a SET chunk_id = u.chunk FROM unnest($1::uuid[], $2::text[]) AS u(id, chunk)"
        " WHERE a.id = u.id",
        ids, chunk_ids,
    )
