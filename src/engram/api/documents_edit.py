"""Editing documents: new tags / observation scopes, their history, reprocessing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from engram.api.deps import require_bank, services
from engram.edit import documents as edit
from engram.recall.rows import iso
from engram.services import Services
from engram.store import document_events
from engram.types import Model, ObservationScopes

router = APIRouter(prefix="/v1/default/banks/{bank_id}/documents/{document_id}", tags=["Documents"])


class UpdateDocumentRequest(Model):
    tags: list[str] | None = None
    observation_scopes: ObservationScopes | None = None


@router.patch("")
async def update_document(
    bank_id: str, document_id: str, body: UpdateDocumentRequest, svc: Services = Depends(services)
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    set_scopes = "observation_scopes" in body.model_fields_set
    return await edit.update_document(
        svc, bank_id, document_id, tags=body.tags, scopes=body.observation_scopes, set_scopes=set_scopes
    )


def _event(row: Any) -> dict[str, Any]:
    removed = [str(i) for i in row["observations_removed"]]
    return {
        "document_id": row["document_id"], "kind": row["kind"], "created_at": iso(row["created_at"]),
        "operation_id": str(row["operation_id"]) if row["operation_id"] else None,
        "fact_id": str(row["fact_id"]) if row["fact_id"] else None,
        "facts_added": row["facts_added"], "facts_removed": row["facts_removed"],
        "observations_created": {"count": 0, "ids": []}, "observations_updated": {"count": 0, "ids": []},
        "observations_removed": {"count": len(removed), "ids": removed},
    }


@router.get("/history")
async def document_history(
    bank_id: str, document_id: str, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    rows, total = await document_events.list_events(svc.pool, bank_id, document_id, limit=limit, offset=offset)
    return {"document_id": document_id, "total": total, "limit": limit, "offset": offset,
            "items": [_event(r) for r in rows]}


@router.post("/reprocess")
async def reprocess_document(bank_id: str, document_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    op_id = await edit.submit_reprocess(svc, bank_id, document_id)
    return {"success": True, "operation_id": str(op_id), "items_count": 1}
