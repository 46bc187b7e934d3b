"""The optional parts of a recall response: entities, chunks and observations' source facts, each
within its own token budget."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.models.tokens import count_tokens, count_tokens_batch
from engram.recall.budget import fill_budget
from engram.recall.rows import fetch_units, iso, result_payload
from engram.types import ChunkData, EntityObservation, EntityStateResponse, SourceFactsIncludeOptions

Result = dict[str, Any]  # a recall result as `result_payload` makes it

OBSERVATIONS_PER_ENTITY = 5


async def include_entities(
    pool: asyncpg.Pool, bank_id: str, results: list[Result], max_tokens: int
) -> dict[str, EntityStateResponse]:
    """The results' entities in rank order, each with its own observation (entities.md; `stale` when
    facts changed since) and then the consolidation observations that mention it."""
    from engram.entity_observations.engine import RECENT_FACTS
    from engram.store.entity_summaries import summaries

    unit_ids = [uuid.UUID(r["id"]) for r in results if r.get("entities")]
    if not unit_ids:
        return {}
    rows = await pool.fetch(
        """
        SELECT e.id, e.canonical_name, min(u.ord) AS first_rank,
               ARRAY(SELECT jsonb_build_object('text', m.text, 'at', m.mentioned_at)
                     FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
                     WHERE ue.entity_id = e.id AND m.fact_type = 'observation'
                     ORDER BY m.updated_at DESC LIMIT $3) AS observations
        FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, ord)
        JOIN unit_entities r ON r.unit_id = u.id JOIN entities e ON e.id = r.entity_id
        WHERE e.bank_id = $1
        GROUP BY e.id ORDER BY first_rank, e.canonical_name
        """,
        bank_id,
        unit_ids,
        OBSERVATIONS_PER_ENTITY,
    )
    own = await summaries(pool, [row["id"] for row in rows], RECENT_FACTS)
    states: dict[str, EntityStateResponse] = {}
    used = 0
    for row in rows:
        name = row["canonical_name"]
        if name in states:  # a namesake further down: the response is keyed by name
            continue
        observations = [EntityObservation(text=o["text"], mentioned_at=o["at"]) for o in row["observations"]]
        summary = own.get(row["id"])
        if summary is not None:
            observations.insert(0, EntityObservation(text=summary.text, mentioned_at=iso(summary.generated_at),
                                                     stale=summary.stale))
        cost = count_tokens(name) + sum(count_tokens_batch([o.text for o in observations]))
        if used + cost > max_tokens:
            break
        used += cost
        states[name] = EntityStateResponse(entity_id=str(row["id"]), canonical_name=name, observations=observations)
    return states


async def include_chunks(pool: asyncpg.Pool, results: list[Result], max_tokens: int) -> dict[str, ChunkData]:
    chunk_ids = list(dict.fromkeys(r["chunk_id"] for r in results if r.get("chunk_id")))
    if not chunk_ids:
        return {}
    rows = await pool.fetch("SELECT id, chunk_text, chunk_index FROM chunks WHERE id = ANY($1::text[])", chunk_ids)
    by_id = {row["id"]: row for row in rows}
    chunks: dict[str, ChunkData] = {}
    used = 0
    for chunk_id in chunk_ids:
        row = by_id.get(chunk_id)
        if row is None:
            continue
        text = row["chunk_text"]
        tokens = count_tokens(text)
        truncated = False
        if used + tokens > max_tokens:
            remaining = max_tokens - used
            if remaining <= 0:
                break
            text = text[: max(1, int(len(text) * remaining / tokens))]
            truncated = True
            tokens = remaining
        used += tokens
        chunks[chunk_id] = ChunkData(id=chunk_id, text=text, chunk_index=row["chunk_index"], truncated=truncated)
        if truncated:
            break
    return chunks


async def include_source_facts(
    pool: asyncpg.Pool, results: list[Result], options: SourceFactsIncludeOptions
) -> tuple[dict[str, Result], bool]:
    """The facts behind the observations among the results, within the budget; True when cut."""
    per_observation = options.max_tokens_per_observation
    wanted: list[uuid.UUID] = []
    for result in results:
        if result["type"] != "observation":
            continue
        ids = [uuid.UUID(i) for i in result.get("source_fact_ids", [])]
        wanted.extend(ids)
    rows = await fetch_units(pool, list(dict.fromkeys(wanted)))
    facts: dict[str, Result] = {}
    truncated = False
    for result in results:
        if result["type"] != "observation":
            continue
        candidates = [rows[uuid.UUID(i)] for i in result.get("source_fact_ids", []) if uuid.UUID(i) in rows]
        if per_observation >= 0:
            kept, _ = fill_budget(candidates, [r["text"] for r in candidates], per_observation)
            truncated |= len(kept) < len(candidates)
            candidates = kept
        for row in candidates:
            facts.setdefault(str(row["id"]), result_payload(row))
    ordered = list(facts.values())
    kept, _ = fill_budget(ordered, [f["text"] for f in ordered], options.max_tokens)
    truncated |= len(kept) < len(ordered)
    return {f["id"]: f for f in kept}, truncated

