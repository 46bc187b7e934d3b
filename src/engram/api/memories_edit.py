"""Editing one memory, and a dry run of extraction (what retain would store, nothing stored)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends

from engram.api.deps import parse_uuid, require_bank, services
from engram.edit.memories import update_memory
from engram.retain.dry_run import dry_run_extract
from engram.services import Services
from engram.types import Model

router = APIRouter(prefix="/v1/default/banks/{bank_id}/memories", tags=["Memory"])


class UpdateMemoryRequest(Model):
    text: str | None = None
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    mentioned_at: str | None = None
    fact_type: str | None = None
    entities: list[str] | None = None
    resolve_entities: bool = True
    state: str | None = None
    reason: str | None = None
    tags: list[str] | None = None  # Engram's: not in the contract's UpdateMemoryRequest
    metadata: dict[str, str] | None = None  # Engram's


class DryRunExtractRequest(Model):
    content: str | list[dict[str, Any]]
    context: str = ""
    timestamp: datetime | str | None = None
    agent_name: str | None = None
    strategy: str | None = None
    retain_mission: str | None = None
    retain_extraction_mode: str | None = None
    retain_custom_instructions: str | None = None
    retain_extract_causal_links: bool | None = None
    retain_chunk_size: int | None = None
    entity_labels: list[dict[str, Any]] | None = None
    entities_allow_free_form: bool | None = None
    llm_output_language: str | None = None


@router.patch("/{memory_id}")
async def patch_memory(
    bank_id: str, memory_id: str, body: UpdateMemoryRequest, svc: Services = Depends(services)
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    fields = body.model_dump(include=body.model_fields_set | {"resolve_entities"})
    return await update_memory(svc, bank_id, parse_uuid(memory_id, "memory"), fields)


@router.post("/dry-run-extract")
async def dry_run(bank_id: str, body: DryRunExtractRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    if body.retain_chunk_size is not None and body.retain_chunk_size <= 0:
        from engram.errors import InvalidInput

        raise InvalidInput("retain_chunk_size", "must be positive")
    return await dry_run_extract(svc, bank_id, body.model_dump())
