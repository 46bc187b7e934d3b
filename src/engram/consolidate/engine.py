"""The consolidation engine: unconsolidated facts, grouped by observation scope, in batches of 8 per
LLM call; each batch's answer is validated, near-duplicates reconciled, and everything (observation
writes and the facts' `consolidated_at`) committed in one transaction.

A batch whose answer never validates is halved down to single facts; a single fact that still fails
is marked failed (visible in stats) rather than retried forever. A provider that is down fails the
whole operation with its reason, so it can be retried without marking every fact failed."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engram import cpu_priority
from engram.consolidate import prompt
from engram.consolidate.dedup import reconcile_near_duplicates
from engram.consolidate.plan import Plan, PlannedWrite, build_plan, merge_evidence
from engram.consolidate.refine import refine_instead_of_deleting
from engram.consolidate.scopes import Scope, resolve_fact_scopes
from engram.consolidate.strategies import ScopeSettings, settings_for_scope
from engram.errors import InvalidLLMOutput, LLMNotConfigured
from engram.store import observations as store
from engram.store.writer_locks import Claim, writing_to_bank

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services

log = logging.getLogger("engram.consolidate")
Progress = Callable[[str, int, int], Awaitable[None]]

FETCH_SIZE = 50
RELATED_PER_FACT = 5


@dataclass
class Round:
    """One consolidation run's state: facts still waiting for some of their scopes, and counters."""

    services: Services
    bank_id: str
    config: dict[str, Any]
    scopes_left: dict[uuid.UUID, int]
    stats: Counter[str]
    claim: Claim | None = None  # the worker's hold on the operation: its writes stop once it is lost


async def consolidate_bank(
    services: Services, bank_id: str, scopes: list[list[str]] | None, progress: Progress | None = None,
    claim: Claim | None = None,
) -> dict[str, Any]:
    """Consolidate up to `consolidation_max_memories_per_round` facts; returns counters and whether
    facts are still waiting (the caller re-queues the job then). Each batch's writes raise ClaimLost,
    with nothing of that batch written, once the worker no longer holds the operation (`claim`): its
    bank was deleted, or another worker took it over and consolidates the same facts."""
    if services.llm is None:
        raise LLMNotConfigured("consolidation")
    config = await services.bank_config(bank_id)
    per_round = max(1, int(config.get("consolidation_max_memories_per_round") or 100))
    state = Round(services, bank_id, config, {}, Counter(), claim)
    processed = 0
    while processed < per_round:
        facts = await store.unconsolidated_facts(services.pool, bank_id, min(FETCH_SIZE, per_round - processed), scopes)
        if not facts:
            break
        await _consolidate_facts(state, facts)
        processed += len(facts)
        if progress:
            await progress("consolidating", processed, per_round)
    more = bool(await store.unconsolidated_facts(services.pool, bank_id, 1, scopes)) if processed else False
    return {"facts_processed": processed, "more_pending": more, **dict(state.stats)}


async def _consolidate_facts(state: Round, facts: list[asyncpg.Record]) -> None:
    default_spec = state.config.get("default_observation_scopes")
    groups: dict[Scope, list[asyncpg.Record]] = {}
    unscoped: list[uuid.UUID] = []
    for fact in facts:
        fact_scopes = resolve_fact_scopes(fact["observation_scopes"] or default_spec, list(fact["tags"]))
        state.scopes_left[fact["id"]] = len(fact_scopes)
        if not fact_scopes:
            unscoped.append(fact["id"])
        for scope in fact_scopes:
            groups.setdefault(scope, []).append(fact)
    if unscoped:  # explicit scopes whose globs matched none of the fact's tags: nothing to build
        await store.mark_consolidated(state.services.pool, unscoped)
    batch_size = max(1, int(state.config.get("consolidation_llm_batch_size") or 8))
    for scope, members in groups.items():
        settings = settings_for_scope(scope, state.config)
        for start in range(0, len(members), batch_size):
            await _with_halving(state, scope, settings, members[start : start + batch_size])


async def _with_halving(state: Round, scope: Scope, settings: ScopeSettings, batch: list[asyncpg.Record]) -> None:
    try:
        await _consolidate_batch(state, scope, settings, batch)
    except InvalidLLMOutput as exc:
        if len(batch) == 1:
            log.warning("fact %s failed consolidation: %s", batch[0]["id"], exc.message)
            await store.mark_failed(state.services.pool, batch[0]["id"], exc.message)
            state.stats["facts_failed"] += 1
            return
        middle = len(batch) // 2
        state.stats["batches_halved"] += 1
        await _with_halving(state, scope, settings, batch[:middle])
        await _with_halving(state, scope, settings, batch[middle:])


async def _consolidate_batch(state: Round, scope: Scope, settings: ScopeSettings, batch: list[asyncpg.Record]) -> None:
    from engram.llm.structured import generate_structured

    services = state.services
    related = await store.related_observations(
        services.pool, state.bank_id, list(scope), [f["embedding"] for f in batch], RELATED_PER_FACT
    )
    facts = {f"F{i}": fact for i, fact in enumerate(batch, start=1)}
    observations = {f"O{i}": row for i, row in enumerate(related, start=1)}
    sources = await _source_texts(services, list(observations.values()), settings)
    messages = prompt.build_messages(
        [prompt.ShownFact(h, f["text"], f["occurred_start"] or f["mentioned_at"]) for h, f in facts.items()],
        [prompt.ShownObservation(h, o["text"], o["proof_count"], sources.get(o["id"], []))
         for h, o in observations.items()],
        scope,
        settings.observations_mission,
    )
    actions, _ = await generate_structured(services.llm, messages, prompt.ConsolidationActions, temperature=0.1)
    plan = build_plan(actions, facts, observations)
    _fold_merged_deletes(plan, observations)
    await _embed(plan.writes)
    refine_instead_of_deleting(plan, observations, state.stats)
    configured = state.config.get("consolidation_dedup_threshold")
    threshold = 0.97 if configured is None else float(configured)  # 0.0 is a value: reconcile everything
    await reconcile_near_duplicates(services, state.bank_id, list(scope), plan, threshold, state.stats)
    await _apply(state, scope, settings, plan, batch)


SOURCES_PER_OBSERVATION = 10


async def _source_texts(
    services: Services, observations: list[Any], settings: ScopeSettings
) -> dict[uuid.UUID, list[str]]:
    """The facts under each shown observation, newest first, within the scope's source-fact budgets
    (`consolidation_source_facts_max_tokens` overall, `…_per_observation` each; -1 = no limit)."""
    from engram.models.tokens import count_tokens_batch
    from engram.store.observation_sources import newest_sources

    if not observations or settings.source_facts_max_tokens == 0:
        return {}
    sources = await newest_sources(services.pool, [o["id"] for o in observations], SOURCES_PER_OBSERVATION)
    total_left = settings.source_facts_max_tokens
    shown: dict[uuid.UUID, list[str]] = {}
    for observation in observations:
        texts = sources[observation["id"]]
        kept, used = [], 0
        for text, tokens in zip(texts, count_tokens_batch(texts)):
            per_left = settings.source_facts_max_tokens_per_observation
            if (per_left >= 0 and used + tokens > per_left) or (total_left >= 0 and tokens > total_left):
                break
            kept.append(text)
            used += tokens
            if total_left >= 0:
                total_left -= tokens
        shown[observation["id"]] = kept
    return shown


def _fold_merged_deletes(plan: Plan, observations: dict[str, Any]) -> None:
    """A delete `merged_into` another observation hands its sources and quotes to that one."""
    by_id = {row["id"]: row for row in observations.values()}
    writes = {w.observation_id: w for w in plan.writes if w.observation_id}
    for deleted, into in plan.deletes.items():
        if into is None:
            continue
        gone = by_id[deleted]
        target = writes.get(into)
        if target is None:
            row = by_id[into]
            target = PlannedWrite(row["text"], list(row["source_memory_ids"]), list(row["evidence"] or []), into,
                                  "absorbed a redundant observation")
            plan.writes.append(target)
            writes[into] = target
        target.sources = list(dict.fromkeys([*target.sources, *gone["source_memory_ids"]]))
        target.evidence = merge_evidence(target.evidence, list(gone["evidence"] or []))


async def _embed(writes: list[PlannedWrite]) -> None:
    from engram.models.embedder import embedder

    pending = [w for w in writes if w.vector is None]
    if pending:
        vectors = await cpu_priority.to_thread(embedder().embed, [w.text for w in pending])
        for write, vector in zip(pending, vectors):
            write.vector = vector


async def _apply(state: Round, scope: Scope, settings: ScopeSettings, plan: Plan, batch: list[asyncpg.Record]) -> None:
    creates = [w for w in plan.writes if w.observation_id is None]
    rewrites = [w for w in plan.writes if w.observation_id is not None and w.observation_id not in plan.deletes]
    for fact in batch:
        state.scopes_left[fact["id"]] -= 1
    finished = [f["id"] for f in batch if state.scopes_left[f["id"]] <= 0]
    # A consolidation slipping past `claim_next`'s check for an import waits for it here (`writer_locks`).
    async with writing_to_bank(state.services.pool, state.bank_id, None, make_bank=False, claim=state.claim) as conn:
        deleted = await store.delete_observations(conn, list(plan.deletes))
        if settings.max_observations_per_scope >= 0:
            room = settings.max_observations_per_scope - await store.count_in_scope(conn, state.bank_id, list(scope))
            state.stats["creates_over_cap"] += max(0, len(creates) - max(room, 0))
            creates = creates[: max(room, 0)]
        for write in rewrites:
            await store.rewrite_observation(
                conn, state.bank_id, write.observation_id, text=write.text, vector=write.vector,
                sources=write.sources, evidence=write.evidence, reason=write.reason,
            )
        for write in creates:
            await store.insert_observation(
                conn, state.bank_id, text=write.text, scope=list(scope), vector=write.vector,
                sources=write.sources, evidence=write.evidence,
            )
        await store.mark_consolidated(conn, finished)
    state.stats["observations_created"] += len(creates)
    state.stats["observations_updated"] += len(rewrites)
    state.stats["observations_deleted"] += deleted
    state.stats["actions_dropped"] += plan.dropped
