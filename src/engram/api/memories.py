"""Memories: retain, recall, listing, one memory, clearing a bank, tags."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic_core import to_json

from engram.api import choices
from engram.api.choices import choice, one_of
from engram.api.deps import parse_uuid, require_bank, services
from engram.errors import InvalidInput, NotFound
from engram.models.tokens import count_tokens
from engram.recall.pipeline import recall_payload
from engram.retain.prepare import prepare_items
from engram.retain.replanned import retain_replanned
from engram.services import Services
from engram.store import memories as store
from engram.store import operations as ops
from engram.store.bank_removals import removal_progress
from engram.store.writer_locks import ensure_bank_to_queue_into
from engram.types import (
    DeleteResponse,
    RecallRequest,
    RecallResponse,
    RetainRequest,
    RetainResponse,
    TokenUsage,
)
from engram.webhooks.events import record_sync_retain

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Memory"])
MAX_QUERY_TOKENS = 512  # the embedding model reads at most 512 tokens; a longer query is a mistake
MAX_QUERY_CHARS = 20_000  # checked first: counting the tokens of a megabyte would hold the event loop


@router.post("/memories", response_model=RetainResponse, response_model_by_alias=True)
async def retain(bank_id: str, body: RetainRequest, request: Request, svc: Services = Depends(services)) -> RetainResponse:
    prepared = prepare_items(body.items, body.document_tags)  # validate before accepting anything
    if body.async_:
        operation_id = parse_uuid(body.operation_id, "operation_id", missing_is_404=False) if body.operation_id else None
        await ensure_bank_to_queue_into(svc.pool, bank_id)
        payload = {
            "items": [item.model_dump(mode="json", exclude_none=True) for item in body.items],
            "document_tags": body.document_tags,
        }
        op_id, _ = await ops.enqueue(
            svc.pool, bank_id, "retain", payload, operation_id=operation_id, items_count=len(body.items),
            document_id=prepared[0].document_id if len(prepared) == 1 else None,
        )
        worker = getattr(request.app.state, "worker", None)
        if worker is not None:
            worker.wake()
        return RetainResponse(
            success=True, bank_id=bank_id, items_count=len(body.items), async_=True,
            operation_id=str(op_id), operation_ids=[str(op_id)],
        )
    event = {"items": [{"document_id": p.document_id} for p in prepared], "document_tags": body.document_tags}

    async def record_event(conn: Any, facts: int) -> None:  # in the retain's transaction: with its facts or not at all
        await record_sync_retain(conn, bank_id, event, facts)

    outcome = await retain_replanned(svc, bank_id, prepared, import_wait=svc.settings.import_wait_seconds,
                                     on_written=record_event)
    usage = TokenUsage(
        input_tokens=outcome.usage.input_tokens,
        output_tokens=outcome.usage.output_tokens,
        total_tokens=outcome.usage.input_tokens + outcome.usage.output_tokens,
    )
    return RetainResponse(success=True, bank_id=bank_id, items_count=outcome.items_count, async_=False, usage=usage)


@router.post("/memories/recall", response_model=RecallResponse, response_model_exclude_none=True)
async def recall_memories(bank_id: str, body: RecallRequest, svc: Services = Depends(services)) -> Response:
    if not body.query.strip():
        raise InvalidInput("query", "must not be empty")
    if len(body.query) > MAX_QUERY_CHARS:
        raise InvalidInput("query", f"longer than {MAX_QUERY_TOKENS} tokens (over {MAX_QUERY_CHARS} characters)")
    if (tokens := count_tokens(body.query)) > MAX_QUERY_TOKENS:
        raise InvalidInput("query", f"longer than {MAX_QUERY_TOKENS} tokens (got {tokens})")
    # Already JSON-ready and null-free: sent as it is, not re-validated and re-serialised as models.
    return Response(to_json(await recall_payload(svc, bank_id, body)), media_type="application/json")


@router.get("/memories/list")
async def list_memories(
    bank_id: str,
    type: str | None = choice(None, choices.FACT_TYPES),
    q: str | None = None,
    document_id: str | None = None,
    entity_id: str | None = None,
    tags: list[str] | None = Query(None),
    tags_match: str = choice("any", choices.TAGS_MATCH),
    consolidation_state: str | None = choice(None, choices.CONSOLIDATION_STATES),
    state: str | None = choice(None, choices.MEMORY_STATES),
    untagged: bool = Query(False, description="only memories with no tags (a query string cannot carry tags=[])"),
    time_field: str | None = choice(None, choices.MEMORY_TIME_FIELDS),
    start_date: str | None = None,
    end_date: str | None = None,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(type, choices.FACT_TYPES, "type")
    one_of(tags_match, choices.TAGS_MATCH, "tags_match")
    one_of(consolidation_state, choices.CONSOLIDATION_STATES, "consolidation_state")
    one_of(state, choices.MEMORY_STATES, "state")
    one_of(time_field, choices.MEMORY_TIME_FIELDS, "time_field")
    await require_bank(svc, bank_id)
    filters = store.ListFilters(
        fact_type=type, q=q, document_id=document_id,
        entity_id=parse_uuid(entity_id, "entity_id", missing_is_404=False) if entity_id else None,
        tags=[] if untagged else tags, tags_match="exact" if untagged else tags_match,
        consolidation_state=consolidation_state, state=state,
        time_field=time_field, start_date=_date(start_date, "start_date"), end_date=_date(end_date, "end_date"),
    )
    rows, total = await store.list_units(svc.pool, bank_id, filters, limit=limit, offset=offset)
    return {"items": [store.list_item(row) for row in rows], "total": total, "limit": limit, "offset": offset}


def _date(value: str | None, field: str) -> Any:
    if value is None:
        return None
    from engram.models.dates import parse_timestamp

    parsed = parse_timestamp(value)
    if parsed is None:
        raise InvalidInput(field, f"not a date: {value!r}")
    return parsed


@router.get("/memories/{memory_id}")
async def get_memory(bank_id: str, memory_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    row = await store.get_unit(svc.pool, bank_id, parse_uuid(memory_id, "memory"))
    if row is None:
        raise NotFound(f"memory '{memory_id}' not found in bank '{bank_id}'")
    return store.detail_item(row)


@router.delete("/memories", response_model=DeleteResponse)
async def clear_memories(
    bank_id: str, type: str | None = choice(None, choices.FACT_TYPES), svc: Services = Depends(services)
) -> DeleteResponse:
    one_of(type, choices.FACT_TYPES, "type")
    await require_bank(svc, bank_id)
    async with removal_progress(svc.pool, bank_id, "clear", type) as progress:  # GET …/removal follows it
        deleted = await store.clear_units(svc.pool, bank_id, type, progress,
                                        import_wait=svc.settings.import_wait_seconds)
    svc.link_counts.forget(bank_id)
    return DeleteResponse(success=True, message=f"deleted {deleted} memories", deleted_count=deleted)


@router.get("/tags")
async def list_tags(
    bank_id: str,
    q: str | None = None,
    source: str = choice("memories", choices.TAG_SOURCES),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(source, choices.TAG_SOURCES, "source")
    await require_bank(svc, bank_id)
    rows, total = await store.list_tags(svc.pool, bank_id, q=q, source=source, limit=limit, offset=offset)
    return {"items": [{"tag": r["tag"], "count": r["count"]} for r in rows], "total": total,
            "limit": limit, "offset": offset}


__all__ = ["router", "uuid"]
