"""What each operation type does. A handler receives the services, the operation row and a progress
reporter, and returns the result to store; raising marks the operation failed with the reason."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services
    from engram.store.writer_locks import Claim

Progress = Callable[[str, int, int], Awaitable[None]]
Handler = Callable[["Services", "asyncpg.Record", Progress], Awaitable[dict[str, Any]]]

HANDLERS: dict[str, Handler] = {}


def claim_of(operation: asyncpg.Record) -> Claim:
    """The claimed operation's hold, for the writes its handler makes (`writer_locks.writing_to_bank`)."""
    from engram.store.writer_locks import Claim

    return Claim(operation["id"], operation["worker_id"])


def handler(operation_type: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[operation_type] = fn
        return fn

    return register


@handler("retain")
async def run_retain(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.retain.prepare import prepare_items
    from engram.retain.replanned import retain_replanned
    from engram.types import MemoryItem

    payload = operation["payload"]
    items = [MemoryItem.model_validate(item) for item in payload["items"]]
    prepared = prepare_items(items, payload.get("document_tags"))
    for item, ready in zip(items, prepared):
        if item.document_id is None:
            # Named after the operation, not at random: a re-run (its worker died after the commit, before
            # recording completion) then replaces these documents, reusing their chunks, instead of copying.
            ready.document_id = str(uuid.uuid5(operation["id"], str(ready.index)))
            ready.document_id_made_here = False  # a re-run finds what the first run stored under it
            ready.update_mode = "replace"

    outcome = await retain_replanned(services, operation["bank_id"], prepared, claim=claim_of(operation),
                                     progress=progress)
    return {
        "items_count": outcome.items_count,
        "facts": len(outcome.unit_ids),
        "usage": {"input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens},
    }


@handler("consolidation")
async def run_consolidation(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.consolidate.engine import consolidate_bank
    from engram.consolidate.trigger import schedule_consolidation

    scopes = (operation["payload"] or {}).get("observation_scopes")
    result = await consolidate_bank(services, operation["bank_id"], scopes, progress, claim_of(operation))
    if result["more_pending"]:  # a round is bounded; the rest goes in a fresh job, never a loop
        next_id, _ = await schedule_consolidation(services, operation["bank_id"], scopes)
        result["continued_in"] = str(next_id)
    changed = sum(result.get(k, 0) for k in ("observations_created", "observations_updated", "observations_deleted"))
    if changed:
        from engram.reflect.mental_models import refresh_after_consolidation

        result["mental_models_refreshing"] = await refresh_after_consolidation(services, operation["bank_id"])
    return result


@handler("entity_observations")
async def run_entity_observations(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.entity_observations.engine import regenerate

    entity_ids = [uuid.UUID(i) for i in operation["payload"]["entity_ids"]]
    return await regenerate(services, operation["bank_id"], entity_ids, progress)


@handler("refresh_mental_model")
async def run_refresh(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.reflect.mental_models import refresh

    await progress("reflecting", 0, 1)
    return await refresh(services, operation["bank_id"], operation["payload"]["mental_model_id"])


# Handlers kept next to the capability they run register themselves when imported.
from engram.transfer import handlers as transfer_handlers  # noqa: E402,F401
from engram.worker import document_handlers  # noqa: E402,F401
