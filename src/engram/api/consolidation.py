"""Observations' lifecycle: trigger consolidation, clear observations (all, or those of one memory),
and an observation's history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends

from engram.api.deps import parse_uuid, require_bank, services
from engram.consolidate.scopes import validate_scope_spec
from engram.consolidate.trigger import schedule_consolidation
from engram.errors import InvalidInput, LLMNotConfigured, NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import memories as memory_store
from engram.store import observations as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Observations"])


@router.post("/consolidate")
async def trigger_consolidation(
    bank_id: str, body: dict[str, Any] | None = Body(None), svc: Services = Depends(services)
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    if svc.llm is None:
        raise LLMNotConfigured("consolidation")
    scopes = (body or {}).get("observation_scopes")
    if scopes is not None:
        if not isinstance(scopes, list):
            raise InvalidInput("observation_scopes", "must be a list of tag lists")
        try:
            validate_scope_spec(scopes, "observation_scopes")
        except ValueError as exc:
            path, _, problem = str(exc).partition(": ")
            raise InvalidInput(path, problem or str(exc)) from None
    operation_id, reused = await schedule_consolidation(svc, bank_id, scopes)
    return {"operation_id": str(operation_id), "deduplicated": reused}


@router.delete("/observations")
async def clear_observations(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    async with svc.changing_bank(bank_id, undone="deleted") as conn:
        deleted = await memory_store.clear_observations(conn, bank_id)
    return {"success": True, "message": f"deleted {deleted} observations", "deleted_count": deleted}


@router.delete("/memories/{memory_id}/observations")
async def clear_memory_observations(bank_id: str, memory_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    unit_id = parse_uuid(memory_id, "memory")
    if await memory_store.get_unit(svc.pool, bank_id, unit_id) is None:
        raise NotFound(f"memory '{memory_id}' not found in bank '{bank_id}'")
    async with svc.changing_bank(bank_id, undone="deleted") as conn:
        deleted = await memory_store.clear_observations_of(conn, bank_id, unit_id)
    # The point of this call is re-synthesis, so the job is queued even with auto-consolidation off.
    if svc.llm is not None and (await svc.bank_config(bank_id)).get("enable_observations", True):
        await schedule_consolidation(svc, bank_id)
    return {"deleted_count": deleted}


@router.get("/memories/{memory_id}/history")
async def observation_history(bank_id: str, memory_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    unit_id = parse_uuid(memory_id, "memory")
    row = await memory_store.get_unit(svc.pool, bank_id, unit_id)
    if row is None:
        raise NotFound(f"memory '{memory_id}' not found in bank '{bank_id}'")
    versions = await store.history(svc.pool, unit_id)
    return {
        "memory_id": memory_id,
        "current": {"text": row["text"], "source_memory_ids": [str(s) for s in row["source_memory_ids"]],
                    "proof_count": row["proof_count"], "updated_at": iso(row["updated_at"])},
        "history": [
            {"text": v["text"], "source_memory_ids": [str(s) for s in v["source_memory_ids"]],
             "evidence": v["evidence"], "reason": v["reason"], "changed_at": iso(v["changed_at"])}
            for v in versions
        ],
    }
