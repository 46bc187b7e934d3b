"""Attachments: the bytes of an image or file retained as a content block (or uploaded as a file),
returned exactly as sent with their media type; and their description on documents and chunks."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from engram.api.deps import parse_uuid, services
from engram.errors import NotFound
from engram.services import Services
from engram.store import attachments as store
from engram.store.tx import Conn

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Memory"])


def attachment_item(row: Any) -> dict[str, Any]:
    """As the contract's ChunkAttachment."""
    return {
        "id": str(row["id"]), "hash": row["sha256"], "kind": row["kind"], "media_type": row["media_type"],
        "byte_size": row["byte_size"], "filename": row["filename"], "role": row["role"],
        "url": f"/v1/default/banks/{row['bank_id']}/attachments/{row['id']}",
    }


async def by_chunk(conn: Conn, chunk_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in await store.of_chunks(conn, chunk_ids):
        grouped.setdefault(row["chunk_id"], []).append(attachment_item(row))
    return grouped


async def of_document(conn: Conn, bank_id: str, document_id: str) -> list[dict[str, Any]]:
    return [attachment_item(row) for row in await store.of_document(conn, bank_id, document_id)]


@router.get("/attachments/{attachment_id}")
async def get_attachment(bank_id: str, attachment_id: str, svc: Services = Depends(services)) -> Response:
    row = await store.get(svc.pool, bank_id, parse_uuid(attachment_id, "attachment"))
    if row is None:
        raise NotFound(f"attachment '{attachment_id}' not found in bank '{bank_id}'")
    headers = {"Content-Disposition": f'inline; filename="{row["filename"]}"'} if row["filename"] else {}
    return Response(content=bytes(row["data"]), media_type=row["media_type"], headers=headers)
