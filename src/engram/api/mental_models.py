"""Mental models: create (with an asynchronous first refresh), read, update, delete, refresh, clear,
history."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fastapi import APIRouter, Body, Depends, Query

from engram.api import choices
from engram.api.choices import choice, one_of
from engram.api.deps import require_bank, services
from engram.errors import Conflict, LLMNotConfigured, NotFound
from engram.recall.rows import iso
from engram.reflect.mental_models import schedule_refresh, validate_trigger
from engram.services import Services
from engram.store import reflect_state as store
from engram.store.writer_locks import ensure_bank_after_any_restore
from engram.types import CreateMentalModelRequest, UpdateMentalModelRequest

router = APIRouter(prefix="/v1/default/banks/{bank_id}/mental-models", tags=["Mental Models"])


def _model(row: Any, *, with_content: bool = True) -> dict[str, Any]:
    body = {
        "id": row["id"], "bank_id": row["bank_id"], "name": row["name"], "source_query": row["source_query"],
        "content": row["content"] if with_content else None, "tags": list(row["tags"]),
        "max_tokens": row["max_tokens"], "trigger": row["trigger"],
        "last_refreshed_at": iso(row["last_refreshed_at"]), "last_memory_seen_at": iso(row["last_memory_seen_at"]),
        "last_refresh_failed_at": iso(row["last_refresh_failed_at"]), "created_at": iso(row["created_at"]),
        "is_knowledge_page": False, "is_stale": row["is_stale"],
    }
    if with_content:
        body["reflect_response"] = row["reflect_response"]
    return body


async def _embed(text: str) -> Any:
    from engram.models.embedder import embed_query

    return await asyncio.to_thread(embed_query, text)


async def _get(svc: Services, bank_id: str, model_id: str) -> Any:
    row = await store.get_mental_model(svc.pool, bank_id, model_id)
    if row is None:
        raise NotFound(f"mental model '{model_id}' not found in bank '{bank_id}'")
    return row


@router.get("")
async def list_models(
    bank_id: str, tags: list[str] | None = Query(None),
    tags_match: str = choice("any", choices.TAGS_MATCH_SIMPLE),
    detail: str = choice("metadata", choices.MENTAL_MODEL_DETAILS),
    limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=2**31 - 1),
    exclude_knowledge_pages: bool = False, svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(tags_match, choices.TAGS_MATCH_SIMPLE, "tags_match")
    one_of(detail, choices.MENTAL_MODEL_DETAILS, "detail")
    await require_bank(svc, bank_id)
    rows, total = await store.list_mental_models(
        svc.pool, bank_id, tags=tags, tags_match=tags_match, limit=limit, offset=offset
    )
    full = detail in ("full", "content")
    return {"items": [_model(r, with_content=full) for r in rows], "total": total, "limit": limit, "offset": offset}


@router.post("")
async def create_model(bank_id: str, body: CreateMentalModelRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    validate_trigger(body.trigger)
    if svc.llm is None:  # refused before anything is stored: a retry must not find the model half made
        raise LLMNotConfigured("creating a mental model (its first refresh)")
    await ensure_bank_after_any_restore(svc.pool, bank_id, svc.settings.import_wait_seconds, undone="created")
    model_id = body.id or uuid.uuid4().hex
    row = await store.insert_mental_model(
        svc.pool, bank_id, model_id, name=body.name, source_query=body.source_query, tags=body.tags,
        max_tokens=body.max_tokens, trigger=body.trigger.model_dump(mode="json", exclude_none=True),
        vector=await _embed(f"{body.name}: {body.source_query}"),
    )
    if row is None:
        raise Conflict(f"mental model '{model_id}' already exists in bank '{bank_id}'")
    operation_id = await schedule_refresh(svc, bank_id, model_id)
    return {"mental_model_id": model_id, "operation_id": str(operation_id)}


@router.get("/{model_id}")
async def get_model(
    bank_id: str, model_id: str, detail: str = choice("full", choices.MENTAL_MODEL_DETAILS),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(detail, choices.MENTAL_MODEL_DETAILS, "detail")
    return _model(await _get(svc, bank_id, model_id), with_content=detail != "metadata")


@router.patch("/{model_id}")
async def update_model(
    bank_id: str, model_id: str, body: UpdateMentalModelRequest, svc: Services = Depends(services)
) -> dict[str, Any]:
    row = await _get(svc, bank_id, model_id)
    changes = body.model_dump(exclude_none=True, mode="json")
    if body.trigger is not None:
        validate_trigger(body.trigger)
        changes["trigger"] = body.trigger.model_dump(mode="json", exclude_none=True)
    if "name" in changes or "source_query" in changes:
        changes["embedding"] = await _embed(f"{changes.get('name', row['name'])}: "
                                            f"{changes.get('source_query', row['source_query'])}")
    await store.update_mental_model(svc.pool, bank_id, model_id, changes)
    return _model(await _get(svc, bank_id, model_id))


@router.delete("/{model_id}")
async def delete_model(bank_id: str, model_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    if not await store.delete_mental_model(svc.pool, bank_id, model_id):
        raise NotFound(f"mental model '{model_id}' not found in bank '{bank_id}'")
    return {"success": True, "message": f"mental model '{model_id}' deleted"}


@router.get("/{model_id}/history")
async def model_history(bank_id: str, model_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await _get(svc, bank_id, model_id)
    rows = await store.mental_model_history(svc.pool, bank_id, model_id)
    return {"mental_model_id": model_id, "history": [
        {"content": r["content"], "refreshed_at": iso(r["refreshed_at"]), "replaced_at": iso(r["replaced_at"])}
        for r in rows
    ]}


@router.post("/{model_id}/refresh")
async def refresh_model(
    bank_id: str, model_id: str, body: dict[str, Any] | None = Body(None), svc: Services = Depends(services)
) -> dict[str, Any]:
    await _get(svc, bank_id, model_id)
    operation_id = await schedule_refresh(svc, bank_id, model_id)
    return {"operation_id": str(operation_id), "status": "pending"}


@router.post("/{model_id}/clear")
async def clear_model(bank_id: str, model_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await _get(svc, bank_id, model_id)
    await store.clear_mental_model(svc.pool, bank_id, model_id)
    return _model(await _get(svc, bank_id, model_id))
