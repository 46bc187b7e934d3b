"""Directives: hard rules reflect follows."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from engram.api import choices
from engram.api.choices import choice, one_of
from engram.api.deps import parse_uuid, require_bank, services
from engram.errors import NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import reflect_state as store
from engram.store.writer_locks import ensure_bank_after_any_restore
from engram.types import CreateDirectiveRequest, UpdateDirectiveRequest

router = APIRouter(prefix="/v1/default/banks/{bank_id}/directives", tags=["Directives"])


def _directive(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]), "bank_id": row["bank_id"], "name": row["name"], "content": row["content"],
        "priority": row["priority"], "is_active": row["is_active"], "tags": list(row["tags"]),
        "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
    }


@router.get("")
async def list_directives(
    bank_id: str, tags: list[str] | None = Query(None), tags_match: str = choice("any", choices.TAGS_MATCH_SIMPLE),
    active_only: bool = True, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(tags_match, choices.TAGS_MATCH_SIMPLE, "tags_match")
    await require_bank(svc, bank_id)
    rows, total = await store.list_directives(
        svc.pool, bank_id, tags=tags, tags_match=tags_match, active_only=active_only, limit=limit, offset=offset
    )
    return {"items": [_directive(r) for r in rows], "total": total, "limit": limit, "offset": offset}


@router.post("")
async def create_directive(bank_id: str, body: CreateDirectiveRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    await ensure_bank_after_any_restore(svc.pool, bank_id, svc.settings.import_wait_seconds, undone="created")
    row = await store.insert_directive(svc.pool, bank_id, **body.model_dump())
    return _directive(row)


async def _get(svc: Services, bank_id: str, directive_id: str) -> Any:
    row = await store.get_directive(svc.pool, bank_id, parse_uuid(directive_id, "directive"))
    if row is None:
        raise NotFound(f"directive '{directive_id}' not found in bank '{bank_id}'")
    return row


@router.get("/{directive_id}")
async def get_directive(bank_id: str, directive_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    return _directive(await _get(svc, bank_id, directive_id))


@router.patch("/{directive_id}")
async def update_directive(
    bank_id: str, directive_id: str, body: UpdateDirectiveRequest, svc: Services = Depends(services)
) -> dict[str, Any]:
    row = await _get(svc, bank_id, directive_id)
    updated = await store.update_directive(svc.pool, bank_id, row["id"], body.model_dump(exclude_none=True))
    return _directive(updated)


@router.delete("/{directive_id}")
async def delete_directive(bank_id: str, directive_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    row = await _get(svc, bank_id, directive_id)
    await store.delete_directive(svc.pool, bank_id, row["id"])
    return {"success": True, "message": f"directive '{directive_id}' deleted"}
