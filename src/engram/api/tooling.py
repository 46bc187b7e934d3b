"""Tooling and stats on one bank: the prompts its operations would send, an LLM probe, the memories
time series, recovery of facts consolidation gave up on, and a dry-run mental-model refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from engram.api.deps import require_bank, services
from engram.consolidate.trigger import schedule_consolidation
from engram.services import Services
from engram.store import observations as observation_store
from engram.store.timeseries import TIME_COLUMNS, memories_per_bucket

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Banks"])

# period: (trunc, step, buckets), as Hindsight 1.1.0 defines them; an unknown period is 7d.
PERIODS = {
    "1h": ("minute", timedelta(minutes=1), 60),
    "12h": ("hour", timedelta(hours=1), 12),
    "1d": ("hour", timedelta(hours=1), 24),
    "7d": ("day", timedelta(days=1), 7),
    "30d": ("day", timedelta(days=1), 30),
    "90d": ("day", timedelta(days=1), 90),
}


class PromptPreviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operation: Literal["retain", "consolidation", "reflect"] = "retain"
    strategy: str | None = None


@router.post("/prompts/preview")
async def preview_prompt(bank_id: str, body: PromptPreviewRequest | None = None,
                         svc: Services = Depends(services)) -> dict[str, Any]:
    from engram.prompt_preview import preview_prompt as render

    await require_bank(svc, bank_id)
    body = body or PromptPreviewRequest()
    return await render(svc, bank_id, body.operation, body.strategy)


@router.post("/health/llm")
async def bank_llm_health(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    from engram.llm.probe import bank_llm_health as probe

    await require_bank(svc, bank_id)
    return await probe(svc.llm, bank_id)


def bucket_start(now: datetime, trunc: str) -> datetime:
    if trunc == "minute":
        return now.replace(second=0, microsecond=0)
    if trunc == "hour":
        return now.replace(minute=0, second=0, microsecond=0)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


@router.get("/stats/memories-timeseries")
async def memories_timeseries(bank_id: str, period: str = "7d", time_field: str = "created_at",
                              svc: Services = Depends(services)) -> dict[str, Any]:
    """Every bucket of the period, empty ones as zeros, on UTC boundaries (as 1.1.0: unknown values
    of `period` and `time_field` fall back to the defaults)."""
    await require_bank(svc, bank_id)
    period = period if period in PERIODS else "7d"
    time_field = time_field if time_field in TIME_COLUMNS else "created_at"
    trunc, step, count = PERIODS[period]
    end = bucket_start(datetime.now(UTC), trunc)
    first = end - step * (count - 1)
    buckets = {first + step * i: {"time": (first + step * i).isoformat(), "world": 0, "experience": 0,
                                  "observation": 0} for i in range(count)}
    for row in await memories_per_bucket(svc.pool, bank_id, time_field, trunc, first):
        bucket = buckets.get(row["bucket"].replace(tzinfo=UTC))
        if bucket is not None:
            bucket[row["fact_type"]] += row["count"]
    return {"bank_id": bank_id, "period": period, "trunc": trunc, "time_field": time_field,
            "buckets": list(buckets.values())}


@router.post("/consolidation/recover")
async def recover_consolidation(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    """Facts marked failed wait for consolidation again, and a consolidation is queued for them."""
    await require_bank(svc, bank_id)
    async with svc.changing_bank(bank_id, undone="changed") as conn:
        retried = await observation_store.reset_failed_consolidation(conn, bank_id)
    queued = None
    if retried and svc.llm is not None and (await svc.bank_config(bank_id)).get("enable_observations", True):
        queued, _ = await schedule_consolidation(svc, bank_id)
    return {"retried_count": retried, "operation_id": str(queued) if queued else None}


@router.post("/mental-models/{mental_model_id}/dry-run-refresh", tags=["Mental Models"])
async def dry_run_refresh(bank_id: str, mental_model_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    from engram.reflect.dry_run_refresh import dry_run_refresh as run

    await require_bank(svc, bank_id)
    return await run(svc, bank_id, mental_model_id)
