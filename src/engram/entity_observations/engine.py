"""Entity observations: after a retain, the top 5 entities mentioned by its facts that have at least
5 facts get their summary regenerated from their 50 most recent facts, replacing the previous one.
Selection runs after the retain's write; the LLM work is a background operation
(`entity_observations`), so a retain never waits on it, and retains that come while one waits to
run add their entities to it (one LLM call per entity however many retains named it meanwhile). No
LLM, no observations."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from engram.errors import LLMNotConfigured
from engram.store import entity_summaries as store
from engram.store import operations as ops

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
    """Write each entity's new summary; an LLM failure fails the operation (the summaries already
    written stay, the rest keep their previous one)."""
    from engram.entity_observations.prompt import EntitySummary, build_messages
    from engram.llm.structured import generate_structured
    from engram.store.entity_reads import get_entity

    if services.llm is None:
        raise LLMNotConfigured("entity observations")
    written = []
    for done, entity_id in enumerate(entity_ids):
        await progress("summarising", done, len(entity_ids))
        entity = await get_entity(services.pool, bank_id, entity_id)
        facts = await store.recent_facts(services.pool, entity_id, RECENT_FACTS) if entity else []
        if len(facts) < MIN_FACTS:  # deleted, or lost facts since it was chosen
            continue
        messages = build_messages(entity["canonical_name"], [(f["text"], f["mentioned_at"]) for f in facts])
        summary, _ = await generate_structured(services.llm, messages, EntitySummary, temperature=0.1)
        await store.replace_summary(services.pool, bank_id, entity_id, summary.text.strip(), [f["id"] for f in facts])
        written.append(str(entity_id))
    return {"entities_summarised": written}
