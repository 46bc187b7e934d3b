"""Queueing consolidation: after retains and deletions (when automatic consolidation is on) and on
request. One whole-bank job is pending per bank at a time; later requests reuse it."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from engram.store import operations as ops

if TYPE_CHECKING:
    from engram.services import Services

OPERATION = "consolidation"


def _dedupe_key(scopes: list[list[str]] | None) -> str:
    if scopes is None:
        return OPERATION
    return OPERATION + ":" + json.dumps(sorted(sorted(set(s)) for s in scopes))


async def schedule_consolidation(
    services: Services, bank_id: str, scopes: list[list[str]] | None = None
) -> tuple[uuid.UUID, bool]:
    """Queue a consolidation job; returns (operation id, whether a pending one was reused)."""
    op_id, created = await ops.enqueue(
        services.pool, bank_id, OPERATION, {"observation_scopes": scopes}, dedupe_key=_dedupe_key(scopes)
    )
    services.wake_worker()
    return op_id, not created


def auto_consolidation_on(services: Services, config: dict[str, Any]) -> bool:
    return (
        services.llm is not None
        and bool(config.get("enable_observations", True))
        and bool(config.get("enable_auto_consolidation", True))
    )


async def after_memory_change(services: Services, bank_id: str, config: dict[str, Any] | None = None) -> None:
    """Retain, delete and update call this: recall's remembered scope sizes of the bank are dropped, and
    consolidation follows when the bank wants it. `config`: the bank's, when the caller has read it."""
    from engram.recall.scope_size import forget_bank

    forget_bank(bank_id)
    if config is None:
        config = await services.bank_config(bank_id)
    if auto_consolidation_on(services, config):
        await schedule_consolidation(services, bank_id)
