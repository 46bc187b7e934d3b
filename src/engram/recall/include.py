"""The optional parts of a recall response: entities, chunks and observations' source facts, each
within its own token budget."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from engram.models.tokens import count_name_tokens, count_tokens, count_tokens_batch
from engram.recall.budget import fill_budget
from engram.recall.rows import fetch_units, iso, result_payload
from engram.types import ChunkData, SourceFactsIncludeOptions

Result = dict[str, Any]  # a recall result as `result_payload` makes it

OBSERVATIONS_PER_ENTITY = 5


async def include_entities(
    pool: asyncpg.Pool, results: list[asyncpg.Record], max_tokens: int
) -> dict[str, dict[str, Any]]:
    """The entities of `results` (the rows of the results, best first, fetched `with_entity_ids`), in
    the order of the best result naming each (then by name), each with its own observation
    (entities.md; `stale` when facts changed since) and then the consolidation observations that
    mention it; JSON-ready EntityStateResponse data, within `max_tokens`. A later entity of a name
    already listed is left out: the response is keyed by name.

    The entities come with the results' rows; one statement reads the observations and summaries of
    those that have any. (Joining the results to their mentions again, then asking for the summaries,
    was two round trips and ~3 ms of a recall that returns ~200 facts.)"""
    from engram.entity_observations.engine import RECENT_FACTS
    from engram.store.entity_summaries import summary_of

    listed: dict[str, uuid.UUID] = {}  # each name's first entity, in the order the results name them
    for row in results:
        for entity_id, name in zip(row["entity_ids"] or (), row["entity_names"], strict=True):
            listed.setdefault(name, entity_id)
    if not listed:
        return {}
    rows = await pool.fetch(
        f"""
        SELECT * FROM (
            SELECT u.id,
                   ARRAY(SELECT jsonb_build_object('text', m.text, 'at', m.mentioned_at)
                         FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
                         WHERE ue.entity_id = u.id AND m.fact_type = 'observation'
                         ORDER BY m.updated_at DESC LIMIT $2) AS observations,
                   s.text AS summary, s.generated_at, s.stale
            FROM unnest($1::uuid[]) AS u(id) LEFT JOIN LATERAL ({summary_of("u.id", "$3")}) s ON true
        ) found
        WHERE summary IS NOT NULL OR cardinality(observations) > 0
        """,
        list(listed.values()),
        OBSERVATIONS_PER_ENTITY,
        RECENT_FACTS,
    )
    observed: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for row in rows:
        own = [{"text": row["summary"], "mentioned_at": iso(row["generated_at"]), "stale": row["stale"]}
               ] if row["summary"] is not None else []
        others = [{"text": o["text"]} | ({"mentioned_at": o["at"]} if o["at"] is not None else {})
                  for o in row["observations"]]
        observed[row["id"]] = own + others
    texts = [o["text"] for entity_id in listed.values() for o in observed.get(entity_id, ())]
    counts = iter(count_tokens_batch(texts))
    states: dict[str, dict[str, Any]] = {}
    used = 0
    for name, entity_id in listed.items():
        observations = observed.get(entity_id, [])
        cost = count_name_tokens(name) + sum(next(counts) for _ in observations)
        if used + cost > max_tokens:
            break
        used += cost
        states[name] = {"entity_id": str(entity_id), "canonical_name": name, "observations": observations}
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

