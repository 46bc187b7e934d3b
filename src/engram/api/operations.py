"""Background operations: list, status with progress, cancel, retry, delete."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from engram.api import choices
from engram.api.choices import choice, one_of
from engram.api.deps import parse_uuid, require_bank, services
from engram.errors import Conflict, NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import operations as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}/operations", tags=["Operations"])


def _summary(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "task_type": row["operation_type"],
        "operation_id": str(row["id"]),
        "operation_type": row["operation_type"],
        "items_count": row["items_count"],
        "document_id": row["document_id"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "status": row["status"],
        "error_message": row["error_message"],
        "retry_count": row["retry_count"],
        "progress": row["progress"],
        "mental_model_id": (row["payload"] or {}).get("mental_model_id"),
        "details": row["result"] if row["operation_type"] == "refresh_mental_model" and row["result"] else None,
    }


@router.get("")
async def list_operations(
    bank_id: str,
    status: str | None = choice(None, choices.OPERATION_STATUSES),
    type: str | None = None,
    limit: int = Query(20, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    exclude_parents: bool = False,
    svc: Services = Depends(services),
) -> dict[str, Any]:
    one_of(status, choices.OPERATION_STATUSES, "status")
    await require_bank(svc, bank_id)
    rows, total = await store.list_for_bank(
        svc.pool, bank_id, status=status, operation_type=type, limit=limit, offset=offset
    )
    return {"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
            "operations": [_summary(r) for r in rows]}


@router.get("/{operation_id}")
async def get_operation(
    bank_id: str, operation_id: str, include_payload: bool = False, svc: Services = Depends(services)
) -> dict[str, Any]:
    try:
        op_id = uuid.UUID(operation_id)
    except ValueError:
        op_id = None
    row = await store.get(svc.pool, bank_id, op_id) if op_id else None
    if row is None:  # the contract's answer for an unknown id is a status, not an error
        return {"operation_id": operation_id, "status": "not_found"}
    body = _summary(row)
    body.update({"operation_id": str(row["id"]), "completed_at": iso(row["completed_at"]),
                 "result_metadata": row["result"]})
    if include_payload:
        body["task_payload"] = row["payload"]
    return body


@router.delete("/{operation_id}")
async def cancel_operation(bank_id: str, operation_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    op_id = parse_uuid(operation_id, "operation")
    if await store.get(svc.pool, bank_id, op_id) is None:
        raise NotFound(f"operation '{operation_id}' not found in bank '{bank_id}'")
    if not await store.cancel(svc.pool, bank_id, op_id):
        raise Conflict(f"operation '{operation_id}' is not pending; only pending operations can be cancelled")
    return {"success": True, "message": "operation cancelled", "operation_id": operation_id}


@router.post("/{operation_id}/retry")
async def retry_operation(
    bank_id: str, operation_id: str, request: Request, svc: Services = Depends(services)
) -> dict[str, Any]:
    op_id = parse_uuid(operation_id, "operation")
    if await store.get(svc.pool, bank_id, op_id) is None:
        raise NotFound(f"operation '{operation_id}' not found in bank '{bank_id}'")
    if not await store.retry(svc.pool, bank_id, op_id):
        raise Conflict(f"operation '{operation_id}' has not failed; only failed or cancelled ones can be retried")
    worker = getattr(request.app.state, "worker", None)
    if worker is not None:
        worker.wake()
    return {"success": True, "message": "operation queued again", "operation_id": operation_id}


@router.delete("/{operation_id}/delete")
async def delete_operation(bank_id: str, operation_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    op_id = parse_uuid(operation_id, "operation")
    if not await store.delete(svc.pool, bank_id, op_id):
        raise NotFound(f"operation '{operation_id}' not found in bank '{bank_id}' (or still processing)")
    return {"success": True, "message": "operation deleted", "operation_id": operation_id}
