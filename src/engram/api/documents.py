"""Documents (what was retained, as sent) and their chunks."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from engram.api import attachments, choices
from engram.api.auth import bank_access
from engram.api.choices import choice, one_of
from engram.api.deps import require_bank, services
from engram.consolidate.trigger import after_memory_change
from engram.errors import NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import documents as store

router = APIRouter(prefix="/v1/default", tags=["Documents"])


def _chunk(row: Any) -> dict[str, Any]:
    return {
        "chunk_id": row["id"],
        "document_id": row["document_id"],
        "bank_id": row["bank_id"],
        "chunk_index": row["chunk_index"],
        "chunk_text": row["chunk_text"],
        "created_at": iso(row["created_at"]),
    }


@router.get("/banks/{bank_id}/documents")
async def list_documents(
    bank_id: str,
    q: str | None = None,
    tags: list[str] | None = Query(None),
    tags_match: str = choice("any_strict", choices.TAGS_MATCH),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(tags_match, choices.TAGS_MATCH, "tags_match")
    await require_bank(svc, bank_id)
    rows, total = await store.list_documents(
        svc.pool, bank_id, q=q, tags=tags, tags_match=tags_match, limit=limit, offset=offset
    )
    items = [
        {
            "id": r["id"], "bank_id": r["bank_id"], "content_hash": r["content_hash"],
            "created_at": iso(r["created_at"]), "updated_at": iso(r["updated_at"]),
            "text_length": r["text_length"], "memory_unit_count": r["memory_unit_count"],
            "retain_params": r["retain_params"], "document_metadata": r["metadata"], "tags": list(r["tags"]),
        }
        for r in rows
    ]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/banks/{bank_id}/documents/{document_id}")
async def get_document(bank_id: str, document_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    row = await store.get_document(svc.pool, bank_id, document_id)
    if row is None:
        raise NotFound(f"document '{document_id}' not found in bank '{bank_id}'")
    return {
        "id": row["id"], "bank_id": bank_id, "original_text": row["original_text"],
        "content_hash": row["content_hash"], "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]), "memory_unit_count": row["memory_unit_count"],
        "nodes_by_fact_type": row["by_type"], "tags": list(row["tags"]), "document_metadata": row["metadata"],
        "retain_params": row["retain_params"], "observation_scopes": row["observation_scopes"],
        "attachments": await attachments.of_document(svc.pool, bank_id, document_id),
    }


@router.delete("/banks/{bank_id}/documents/{document_id}")
async def delete_document(bank_id: str, document_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    deleted = await store.delete_document(svc.pool, bank_id, document_id, import_wait=svc.settings.import_wait_seconds)
    if deleted is None:
        raise NotFound(f"document '{document_id}' not found in bank '{bank_id}'")
    await after_memory_change(svc, bank_id)
    return {"success": True, "message": f"document '{document_id}' deleted", "document_id": document_id,
            "memory_units_deleted": deleted}


@router.get("/banks/{bank_id}/documents/{document_id}/chunks")
async def list_chunks(
    bank_id: str, document_id: str, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    rows, total = await store.list_chunks(svc.pool, bank_id, document_id, limit=limit, offset=offset)
    found = await attachments.by_chunk(svc.pool, [r["id"] for r in rows])
    items = [_chunk(r) | {"attachments": found.get(r["id"], [])} for r in rows]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/chunks/{chunk_id}")
async def get_chunk(chunk_id: str, request: Request, svc: Services = Depends(services)) -> dict[str, Any]:
    row = await store.get_chunk(svc.pool, chunk_id)
    access = bank_access(request)  # a bank-limited API key sees other banks' chunks as missing
    if row is None or (access is not None and not access.allows(row["bank_id"])):
        raise NotFound(f"chunk '{chunk_id}' not found")
    return _chunk(row) | {"attachments": (await attachments.by_chunk(svc.pool, [chunk_id])).get(chunk_id, [])}
