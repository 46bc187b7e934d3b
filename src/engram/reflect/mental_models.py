"""Mental models: stored answers to standing questions. A refresh runs reflect on the model's
source query within its tags and keeps the previous content in history; triggers are a manual
refresh, `refresh_after_consolidation` and a UTC cron. One refresh per model runs at a time."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput, LLMNotConfigured
from engram.store import operations as ops
from engram.store import reflect_state as store
from engram.types import MentalModelTrigger, ReflectIncludeOptions, ReflectRequest

if TYPE_CHECKING:
    from engram.services import Services

OPERATION = "refresh_mental_model"


def validate_trigger(trigger: MentalModelTrigger, field: str = "trigger") -> None:
    from engram.reflect.cron import parse

    for name in ("refresh_cron", "full_refresh_cron"):
        expression = getattr(trigger, name)
        if expression:
            try:
                parse(expression)
            except ValueError as exc:
                raise InvalidInput(f"{field}.{name}", str(exc)) from None


async def schedule_refresh(services: Services, bank_id: str, model_id: str) -> uuid.UUID:
    """Queue a refresh; a refresh already waiting for this model is reused."""
    if services.llm is None:
        raise LLMNotConfigured("refreshing a mental model")
    op_id, _ = await ops.enqueue(
        services.pool, bank_id, OPERATION, {"mental_model_id": model_id}, dedupe_key=f"{OPERATION}:{model_id}"
    )
    services.wake_worker()
    return op_id


def refresh_request(row: Any) -> ReflectRequest:
    trigger = MentalModelTrigger.model_validate(row["trigger"] or {})
    return ReflectRequest(
        query=row["source_query"],
        budget=trigger.budget or "low",
        max_tokens=row["max_tokens"],
        tags=list(row["tags"]) or None,
        tags_match=trigger.tags_match or "any",
        tag_groups=trigger.tag_groups,
        fact_types=trigger.fact_types,
        exclude_mental_models=trigger.exclude_mental_models,
        exclude_mental_model_ids=[row["id"], *(trigger.exclude_mental_model_ids or [])],
        include=ReflectIncludeOptions(facts={}, tool_calls={} if trigger.keep_trace else None),
        response_schema=trigger.response_schema,
        reflect_search_observations_max_tokens=trigger.reflect_search_observations_max_tokens,
    )


async def refresh(services: Services, bank_id: str, model_id: str) -> dict[str, Any]:
    """Run the refresh under a per-model advisory lock, so two workers never refresh one model at once."""
    from engram.reflect.agent import reflect

    async with services.pool.acquire() as lock_conn:
        await lock_conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 1))", f"{bank_id}/{model_id}")
        try:
            row = await store.get_mental_model(services.pool, bank_id, model_id)
            if row is None:
                return {"operation_type": OPERATION, "outcome": "refresh_failed_error", "failure_reason": "unexpected_error",
                        "detail": "the mental model was deleted"}
            seen_at = await store.newest_memory_in_scope(services.pool, bank_id, list(row["tags"]))
            try:
                response = await reflect(services, bank_id, refresh_request(row))
            except Exception as exc:
                await store.record_refresh_failure(services.pool, bank_id, model_id, getattr(exc, "message", str(exc)))
                raise
            if not response.text.strip():
                await store.record_refresh_failure(services.pool, bank_id, model_id, "reflect returned no answer")
                return {"operation_type": OPERATION, "outcome": "refresh_failed_empty_candidate",
                        "failure_reason": "empty_candidate", "mental_model_id": model_id}
            async with services.pool.acquire() as conn, conn.transaction():
                await store.store_refresh(
                    conn, bank_id, model_id, content=response.text,
                    reflect_response=response.model_dump(mode="json", exclude_none=True), memory_seen_at=seen_at,
                )
            outcome = "content_written" if response.text != row["content"] else "content_unchanged"
            return {"operation_type": OPERATION, "outcome": outcome, "mental_model_id": model_id}
        finally:
            await lock_conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 1))", f"{bank_id}/{model_id}")


async def refresh_after_consolidation(services: Services, bank_id: str) -> list[str]:
    model_ids = await store.models_to_refresh_after_consolidation(services.pool, bank_id)
    for model_id in model_ids:
        await schedule_refresh(services, bank_id, model_id)
    return model_ids


async def run_cron_schedules(services: Services, now: datetime | None = None) -> int:
    """Queue the refreshes whose cron fired since their last refresh; returns how many."""
    from engram.reflect.cron import due

    if services.llm is None:
        return 0
    now = now or datetime.now(UTC)
    queued = 0
    for row in await store.models_with_cron(services.pool):
        try:
            fire = due(row["cron"], row["last_refreshed_at"], now)
        except ValueError:
            continue
        if fire:
            await schedule_refresh(services, row["bank_id"], row["id"])
            queued += 1
    return queued


async def cron_loop(services: Services, interval: float = 30.0, polling: asyncio.Lock | None = None) -> None:
    """Runs in the worker; its query takes turns with the worker's other polls through `polling`."""
    while True:
        try:
            async with polling or contextlib.nullcontext():
                await run_cron_schedules(services)
        except Exception:  # the database may be restarting; try again next tick
            import logging

            logging.getLogger("engram.reflect").exception("cron schedules failed")
        await asyncio.sleep(interval)
