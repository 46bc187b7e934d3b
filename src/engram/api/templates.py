"""Bank templates: export, import (with dry run), the manifest's JSON schema and the bank settings' schema."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from engram.api.deps import require_bank, services
from engram.bank_schema import config_json_schema
from engram.services import Services
from engram.templates import BankTemplateManifest, export_template, import_template

router = APIRouter(prefix="/v1", tags=["Bank Templates"])


@router.get("/default/banks/{bank_id}/export")
async def export_bank(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    manifest = await export_template(svc, bank_id)
    return manifest.model_dump(mode="json", exclude_none=True)


@router.post("/default/banks/{bank_id}/import")
async def import_bank(
    bank_id: str, body: BankTemplateManifest, dry_run: bool = False, svc: Services = Depends(services)
) -> dict[str, Any]:
    return await import_template(svc, bank_id, body, dry_run=dry_run)


@router.get("/bank-template-schema")
async def template_schema() -> dict[str, Any]:
    return BankTemplateManifest.model_json_schema()


@router.get("/bank-config-schema", tags=["Banks"])
async def config_schema() -> dict[str, Any]:
    """Every bank setting with its type, range and default: what PATCH …/config, bank PUT, templates
    and the environment accept (the control plane builds its settings form from it)."""
    return config_json_schema()
