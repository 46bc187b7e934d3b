"""Banks: profiles, listing, config overrides and stats."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request

from engram.api.auth import bank_access
from engram.api.deps import require_bank, services
from engram.bank_config import invalid_overrides, resolve_config, validate_updates
from engram.errors import BankNotFound, NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import aliases as alias_store
from engram.store import banks as store
from engram.store.bank_removals import removal_progress, removal_under_way
from engram.store.writer_locks import wait_for_bank_writers
from engram.types import (
    BankConfigResponse,
    BankConfigUpdate,
    BankListItem,
    BankListResponse,
    BankProfileResponse,
    CreateBankRequest,
    DeleteResponse,
    DispositionTraits,
)

router = APIRouter(prefix="/v1/default/banks", tags=["Banks"])

PROFILE_FIELDS = {"name", "mission", "background", "disposition"}


def _disposition(config: dict[str, Any]) -> DispositionTraits:
    return DispositionTraits(
        skepticism=config["disposition_skepticism"],
        literalism=config["disposition_literalism"],
        empathy=config["disposition_empathy"],
    )


def _config_updates(body: CreateBankRequest) -> dict[str, Any]:
    """The request's config-like fields (everything but the profile) as config overrides."""
    updates = {
        key: value
        for key, value in body.model_dump(exclude_none=True).items()
        if key not in PROFILE_FIELDS
    }
    if body.disposition is not None:
        updates.update({f"disposition_{trait}": value for trait, value in body.disposition.model_dump().items()})
    return validate_updates(updates, where="")


async def _profile(svc: Services, bank_id: str) -> BankProfileResponse:
    row = await store.get_bank(svc.pool, bank_id)
    if row is None:
        raise BankNotFound(bank_id)
    config = resolve_config(svc.settings.bank_defaults, row["config"], bank_id)
    return BankProfileResponse(
        bank_id=bank_id,
        name=row["name"] or bank_id,
        disposition=_disposition(config),
        mission=row["mission"] or config.get("reflect_mission") or "",
        background=row["background"],
    )


@router.get("", response_model=BankListResponse)
async def list_banks(
    request: Request,
    q: str | None = None,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> BankListResponse:
    access = bank_access(request)  # a bank-limited API key lists only its banks
    only = access.regexes if access is not None else None
    rows, total = await store.list_banks(svc.pool, q=q, limit=limit, offset=offset, only=only)
    shown_as = await alias_store.display_aliases(svc.pool, [row["bank_id"] for row in rows])
    items = []
    for row in rows:
        config = resolve_config(svc.settings.bank_defaults, row["config"], row["bank_id"])
        items.append(
            BankListItem(
                bank_id=row["bank_id"],
                name=row["name"],
                disposition=_disposition(config),
                mission=row["mission"] or config.get("reflect_mission"),
                created_at=iso(row["created_at"]),
                updated_at=iso(row["updated_at"]),
                fact_count=row["fact_count"],
                last_document_at=iso(row["last_document_at"]),
                last_write_at=iso(row["last_write_at"]),
                display_alias=shown_as.get(row["bank_id"]),
            )
        )
    return BankListResponse(banks=items, total=total, limit=limit, offset=offset)


async def after_any_import(svc: Services, bank_id: str) -> None:
    """Wait, without a connection, for an import into the bank to end (up to ENGRAM_IMPORT_WAIT_SECONDS,
    then 503): it holds the bank's row from its start to its end, and a change to the row waited for
    it holding a pooled connection."""
    await wait_for_bank_writers(svc.pool, bank_id, svc.settings.import_wait_seconds, undone="changed")


@router.put("/{bank_id}", response_model=BankProfileResponse)
@router.patch("/{bank_id}", response_model=BankProfileResponse)
async def create_or_update_bank(
    bank_id: str, body: CreateBankRequest = Body(default_factory=CreateBankRequest), svc: Services = Depends(services)
) -> BankProfileResponse:
    await after_any_import(svc, bank_id)
    await store.upsert_bank(
        svc.pool,
        bank_id,
        name=body.name,
        mission=body.mission,
        background=body.background,
        config_updates=_config_updates(body),
    )
    return await _profile(svc, bank_id)


@router.delete("/{bank_id}", response_model=DeleteResponse)
async def delete_bank(bank_id: str, svc: Services = Depends(services)) -> DeleteResponse:
    async with removal_progress(svc.pool, bank_id, "delete") as progress:
        deleted = await store.delete_bank(svc.pool, bank_id, progress=progress,
                                          import_wait=svc.settings.import_wait_seconds)
    svc.link_counts.forget(bank_id)
    if not deleted:
        raise BankNotFound(bank_id)
    return DeleteResponse(success=True, message=f"bank '{bank_id}' deleted")


@router.get("/{bank_id}/removal")
async def bank_removal(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    """Engram's: how far the bank's whole clear (`DELETE …/memories`) or delete under way has gone, in
    facts deleted of the facts there were; 404 when none is. Both answer only once done (one
    transaction), ~30 min at 10 M memories."""
    row = await removal_under_way(svc.pool, bank_id)
    if row is None:
        raise NotFound(f"no clear or delete of bank '{bank_id}' is under way")
    return {"bank_id": bank_id, "action": row["action"], "fact_type": row["fact_type"], "done": row["done"],
            "total": row["total"], "started_at": iso(row["started_at"]), "updated_at": iso(row["updated_at"])}


async def _config_response(svc: Services, bank_id: str) -> BankConfigResponse:
    row = await store.get_bank(svc.pool, bank_id)
    if row is None:
        raise BankNotFound(bank_id)
    overrides = row["config"] or {}
    return BankConfigResponse(
        bank_id=bank_id, config=resolve_config(svc.settings.bank_defaults, overrides, bank_id), overrides=overrides,
        invalid_overrides=invalid_overrides(overrides),
    )


@router.get("/{bank_id}/config", response_model=BankConfigResponse)
async def get_config(bank_id: str, svc: Services = Depends(services)) -> BankConfigResponse:
    return await _config_response(svc, bank_id)


@router.patch("/{bank_id}/config", response_model=BankConfigResponse)
async def update_config(bank_id: str, body: BankConfigUpdate, svc: Services = Depends(services)) -> BankConfigResponse:
    updates = validate_updates(body.updates)
    await after_any_import(svc, bank_id)
    await store.ensure_bank(svc.pool, bank_id)
    row = await store.get_bank(svc.pool, bank_id)
    overrides = {**(row["config"] or {}), **updates}
    # A null value removes the override, so the setting falls back to the environment's.
    overrides = {key: value for key, value in overrides.items() if value is not None}
    await store.set_config_overrides(svc.pool, bank_id, overrides)
    return await _config_response(svc, bank_id)


@router.delete("/{bank_id}/config", response_model=BankConfigResponse)
async def reset_config(bank_id: str, svc: Services = Depends(services)) -> BankConfigResponse:
    await require_bank(svc, bank_id)
    await after_any_import(svc, bank_id)
    await store.set_config_overrides(svc.pool, bank_id, {})
    return await _config_response(svc, bank_id)


def consolidation_status(svc: Services, config: dict[str, Any]) -> dict[str, Any]:
    """Whether this bank's facts get consolidated at all, and if not, why and which setting turns it on:
    with no LLM a fact's "pending" state is not a queue that will drain."""
    if svc.llm is None:
        return {"enabled": False, "reason": "no LLM configured", "setting": "ENGRAM_LLM_PROVIDER"}
    if not config.get("enable_observations", True):
        return {"enabled": False, "reason": "observations are off for this bank", "setting": "enable_observations"}
    return {"enabled": True, "reason": None, "setting": None}


@router.get("/{bank_id}/stats")
async def get_stats(bank_id: str, refresh: bool = False, svc: Services = Depends(services)) -> dict[str, Any]:
    row = await store.get_bank(svc.pool, bank_id)
    if row is None:
        raise BankNotFound(bank_id)
    config = resolve_config(svc.settings.bank_defaults, row["config"] or {})
    stats = await store.bank_stats(svc.pool, bank_id)
    links = await svc.link_counts.of(svc.pool, bank_id, refresh=refresh)
    by_type = dict(stats["by_type"])
    ops = dict(stats["ops"])
    breakdown: dict[str, dict[str, int]] = {}
    by_fact_type_links: dict[str, int] = {}
    for key, count in links["breakdown"].items():
        fact_type, link_type = key.split("/", 1)
        breakdown.setdefault(fact_type, {})[link_type] = count
        by_fact_type_links[fact_type] = by_fact_type_links.get(fact_type, 0) + count
    return {
        "bank_id": bank_id,
        "total_nodes": sum(by_type.values()),
        "total_links": sum(links["by_link"].values()),
        "total_documents": stats["documents"],
        "nodes_by_fact_type": by_type,
        "links_by_link_type": links["by_link"],
        "links_by_fact_type": by_fact_type_links,
        "links_breakdown": breakdown,
        "pending_operations": ops.get("pending", 0) + ops.get("processing", 0),
        "failed_operations": ops.get("failed", 0),
        "operations_by_status": ops,
        "last_consolidated_at": iso(stats["last_consolidated_at"]),
        "last_memory_write_at": iso(stats["last_write_at"]),
        "pending_consolidation": stats["pending_consolidation"],
        "failed_consolidation": stats["failed_consolidation"],
        "total_observations": by_type.get("observation", 0),
        "consolidation": consolidation_status(svc, config),
    }
