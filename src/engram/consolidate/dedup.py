"""Near-duplicate reconciliation: before a new or rewritten observation is written, it is compared
with its 5 closest observations of the same scope. At cosine ≥ `consolidation_dedup_threshold`
(default 0.97; 1.0 disables) a focused LLM call reads both and decides merge or keep, so
observations differing in a number, a negation or a name stay apart. A merge folds the evidence
together into the existing observation."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from engram import cpu_priority
from engram.consolidate import prompt
from engram.consolidate.plan import Plan, PlannedWrite, merge_evidence
from engram.store import observations as store

if TYPE_CHECKING:
    from engram.services import Services

NEIGHBOURS = 5


async def reconcile_near_duplicates(
    services: Services, bank_id: str, scope: list[str], plan: Plan, threshold: float, stats: Counter[str]
) -> None:
    if threshold >= 1.0:
        return
    from engram.llm.structured import generate_structured

    for write in list(plan.writes):
        busy = [*plan.deletes, *(w.observation_id for w in plan.writes if w.observation_id)]
        near = await store.nearest_in_scope(services.pool, bank_id, scope, write.vector, busy, NEIGHBOURS)
        twin = next((row for row in near if row["similarity"] >= threshold), None)
        if twin is None:
            continue
        decision, _ = await generate_structured(
            services.llm, prompt.merge_messages(twin["text"], write.text), prompt.MergeDecision, temperature=0.0
        )
        if decision.decision.strip().lower() != "merge":
            stats["near_duplicates_kept"] += 1
            continue
        stats["near_duplicates_merged"] += 1
        if write.observation_id is not None:
            plan.deletes[write.observation_id] = twin["id"]
        write.observation_id = twin["id"]
        write.text = (decision.text or twin["text"]).strip()
        write.sources = list(dict.fromkeys([*twin["source_memory_ids"], *write.sources]))
        write.evidence = merge_evidence(list(twin["evidence"] or []), write.evidence)
        write.reason = "merged a near-duplicate observation"
        write.vector = None
    await _reembed([w for w in plan.writes if w.vector is None])


async def _reembed(writes: list[PlannedWrite]) -> None:
    if not writes:
        return
    from engram.models.embedder import embedder

    vectors = await cpu_priority.to_thread(embedder().embed, [w.text for w in writes])
    for write, vector in zip(writes, vectors):
        write.vector = vector
