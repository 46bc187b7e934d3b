"""Observation scopes and consolidation strategies: list the scopes a bank's observations live in, and
preview which strategy of a draft list would handle each of them (nothing is saved). Without a draft,
the preview shows the configured strategies as consolidation reads them, and which entries it drops."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from engram.api.deps import require_bank, services
from engram.consolidate.strategies import parse_strategies, preview
from engram.consolidate.strategy_report import read_configured
from engram.errors import InvalidInput
from engram.services import Services
from engram.store import observation_scopes as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Observations"])
PREVIEW_MAX_SCOPES = 10_000


class StrategiesPreviewRequest(BaseModel):
    # Entries stay raw here: the strategies parser names the offending entry ("strategies[1].scopes[0]…"),
    # which a schema error could not do as readably. None (an Engram extension): the configured ones.
    strategies: list[Any] | None = None
    sample_limit: int = Field(5, ge=0, le=50)


@router.get("/observations/scopes")
async def list_observation_scopes(
    bank_id: str,
    limit: int = Query(100, ge=0, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    rows, total = await store.list_scopes(svc.pool, bank_id, limit, offset)
    return {
        "scopes": [{"tags": list(tags), "count": count} for tags, count in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


@router.post("/consolidation-strategies/preview")
async def preview_consolidation_strategies(
    bank_id: str, body: StrategiesPreviewRequest, svc: Services = Depends(services)
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    extra: dict[str, Any] = {"source": "draft"}
    if body.strategies is None:
        configured = read_configured((await svc.bank_config(bank_id)).get("consolidation_strategies"))
        strategies = configured.strategies
        extra = {"source": "configured", "dropped": configured.dropped, "relaxed": configured.relaxed}
    else:
        try:
            strategies = parse_strategies(body.strategies, strict=True, where="strategies")
        except ValueError as exc:
            path, _, problem = str(exc).partition(": ")
            raise InvalidInput(path, problem or str(exc)) from None
    scopes, complete = await store.scan_scopes(svc.pool, bank_id, PREVIEW_MAX_SCOPES)
    return {**preview(strategies, scopes, body.sample_limit, complete), **extra}
