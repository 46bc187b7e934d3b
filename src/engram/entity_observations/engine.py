"""Entity observations: after a retain, the top 5 entities mentioned by its facts that have at least
5 facts get their summary regenerated from their 50 most recent facts, replacing the previous one.
Selection runs after the retain's write; the LLM work is a background operation
(`entity_observations`), so a retain never waits on it, and retains that come while one waits to
run add their entities to it (one LLM call per entity however many retains named it meanwhile). No
LLM, no observations."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from engram.errors import LLMNotConfigured
from engram.llm.call_slots import retain_share
from engram.store import entity_summaries as store
from engram.store import operations as ops
from engram.together import run_together

if TYPE_CHECKING:
    from engram.services import Services

OPERATION = "entity_observations"
TOP_ENTITIES = 5
MIN_FACTS = 5
RECENT_FACTS = 50

Progress = Callable[[str, int, int], Awaitable[None]]


def enabled(services: Services, config: dict[str, Any]) -> bool:
    return services.llm is not None and bool(config.get("enable_observations", True))


async def after_retain(services: Services, bank_id: str, unit_ids: list[uuid.UUID], config: dict[str, Any]) -> None:
    """Queue the regeneration of this retain's qualifying entities, if any."""
    if not unit_ids or not enabled(services, config):
        return
    entity_ids = await store.top_entities_of_units(services.pool, unit_ids, TOP_ENTITIES, MIN_FACTS)
    if not entity_ids:
        return
    ids = [str(i) for i in entity_ids]
    for _ in range(3):  # a pending job takes these entities too; one a worker just claimed cannot
        op_id, created = await ops.enqueue(services.pool, bank_id, OPERATION, {"entity_ids": ids},
                                           dedupe_key=OPERATION)
        if created or await store.add_to_pending_job(services.pool, op_id, ids):
            break
    services.wake_worker()


async def regenerate(
    services: Services, bank_id: str, entity_ids: list[uuid.UUID], progress: Progress
) -> dict[str, Any]:
    """Write each entity's new summary, as many at once as a retain extracts chunks (each entity's is
    one call and independent of the others'; one after another, twenty entities waited twenty model
    answers). An LLM failure fails the operation: the summaries already written stay, the calls still
    out are cancelled and their entities keep their previous summary."""
    if services.llm is None:
        raise LLMNotConfigured("entity observations")
    written: set[uuid.UUID] = set()
    done = 0
    at_once = asyncio.Semaphore(retain_share(services.settings.llm_max_concurrent))

    async def summarise(entity_id: uuid.UUID) -> None:
        nonlocal done
        async with at_once:
            if await _summarise(services, bank_id, entity_id):
                written.add(entity_id)
        done += 1
        await progress("summarising", done, len(entity_ids))

    await progress("summarising", 0, len(entity_ids))
    await run_together(summarise(entity_id) for entity_id in entity_ids)  # a failed call stops the rest
    return {"entities_summarised": [str(entity_id) for entity_id in entity_ids if entity_id in written]}


async def _summarise(services: Services, bank_id: str, entity_id: uuid.UUID) -> bool:
    """Regenerate one entity's summary from its recent facts; False when it no longer qualifies."""
    from engram.entity_observations.prompt import EntitySummary, build_messages
    from engram.llm.structured import generate_structured
    from engram.store.entity_reads import get_entity

    entity = await get_entity(services.pool, bank_id, entity_id)
    facts = await store.recent_facts(services.pool, entity_id, RECENT_FACTS) if entity else []
    if len(facts) < MIN_FACTS:  # deleted, or lost facts since it was chosen
        return False
    messages = build_messages(entity["canonical_name"], [(f["text"], f["mentioned_at"]) for f in facts])
    summary, _ = await generate_structured(services.llm, messages, EntitySummary, temperature=0.1)
    await store.replace_summary(services.pool, bank_id, entity_id, summary.text.strip(), [f["id"] for f in facts])
    return True
