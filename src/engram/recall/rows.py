"""Loading candidate memory units with what a recall result shows, and shaping them."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from engram.recall.filters import UnitFilter
from engram.recall.neighbours import Neighbours, neighbours_sql
from engram.store.sql import SqlParams

CANDIDATE_COLUMNS = """
    m.id, m.text, m.fact_type, m.context, m.occurred_start, m.occurred_end, m.mentioned_at, m.created_at,
    m.document_id, NULLIF(m.metadata, '{}'::jsonb) AS metadata, m.chunk_id, m.tags, m.source_memory_ids,
    m.proof_count, m.token_count
"""


def _names(ids: str, with_ids: bool = False) -> str:
    """A CTE `names`: each unit's entity names (sorted) and their kinds (for the asked kind's boost),
    and `with_ids` their ids in the names' order, for the units the SQL array `ids` names: one join for
    all of them. A subquery per row did the same work ~300 times over (2.6 of a recall's 3.3 ms of
    candidate fetch at 1,000 facts)."""
    entity_ids = ", array_agg(e.id ORDER BY e.canonical_name, e.id) AS entity_ids" if with_ids else ""
    return f"""
    names AS (
        SELECT ue.unit_id, array_agg(e.canonical_name ORDER BY e.canonical_name, e.id) AS entity_names,
               array_agg(DISTINCT e.entity_type) FILTER (WHERE e.entity_type IS NOT NULL) AS entity_types
               {entity_ids}
        FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
        WHERE ue.unit_id = ANY({ids})
        GROUP BY ue.unit_id
    )
"""


_WITH_NAMES = """coalesce(n.entity_names, '{}') AS entity_names, coalesce(n.entity_types, '{}') AS entity_types"""
_UNITS_WITH_NAMES = f"""
    WITH {_names("$1::uuid[]")}
    SELECT {CANDIDATE_COLUMNS}, {_WITH_NAMES}
    FROM memory_units m LEFT JOIN names n ON n.unit_id = m.id
    WHERE m.id = ANY($1::uuid[])
"""


async def fetch_candidates(
    pool: asyncpg.Pool, scope: UnitFilter, unit_ids: list[uuid.UUID], query_vector: Any,
    neighbours_of: list[uuid.UUID], with_entity_ids: bool = False,
) -> tuple[dict[uuid.UUID, asyncpg.Record], Neighbours]:
    """What scoring, the budget and the results need of the candidates `unit_ids`, and in the same
    round trip the neighbours of the facts `neighbours_of` (`neighbours.neighbours_sql`), whose rows
    come with the candidates': a neighbour's share may lift it among the results, and only a neighbour
    can rise there (the others keep their scores). Two queries one after the other, the neighbours'
    and the candidates', were two round trips on a recall's way (~0.4 ms of ~15 at 1,000 facts).

    Entity names (and their kinds, for the asked kind's boost) come in the same round trip: most
    candidates are kept (a budget of 4,096 tokens holds ~200 short facts), so a second query for the
    kept ones cost more than the names of the few dropped. `with_entity_ids`: also the entities' ids
    (`entity_ids`, in the names' order), for a response that includes the results' entities
    (`engram.recall.include.include_entities`)."""
    if not unit_ids and not neighbours_of:
        return {}, {}
    params = SqlParams()
    neighbours = neighbours_sql(params, scope, neighbours_of)
    ids, vector = params.add(unit_ids), params.add(query_vector)
    rows = await pool.fetch(
        f"""
        WITH neighbours AS MATERIALIZED ({neighbours}),
        wanted AS MATERIALIZED (
            -- repeats are harmless: an index scan for `= ANY(array)` reads each value once
            SELECT ARRAY(SELECT unnest({ids}::uuid[]) UNION ALL SELECT neighbour FROM neighbours) AS ids
        ),
        {_names("(SELECT ids FROM wanted)::uuid[]", with_entity_ids)},
        shares AS (  -- the facts each neighbour is a neighbour of
            SELECT neighbour, array_agg(unit) AS units, array_agg(reply) AS replies FROM neighbours GROUP BY neighbour
        )
        SELECT {CANDIDATE_COLUMNS}, {_WITH_NAMES}, {"n.entity_ids," if with_entity_ids else ""}
               1 - (m.embedding <=> {vector}::vector) AS similarity,
               s.units AS neighbour_of, s.replies AS reply_to
        FROM memory_units m LEFT JOIN names n ON n.unit_id = m.id LEFT JOIN shares s ON s.neighbour = m.id
        WHERE m.id = ANY((SELECT ids FROM wanted)::uuid[])
        """,
        *params.values,
    )
    found: Neighbours = {}
    for row in rows:
        for unit, reply in zip(row["neighbour_of"] or (), row["reply_to"] or (), strict=True):
            found.setdefault(unit, []).append((row["id"], bool(reply)))
    return {row["id"]: row for row in rows}, found


async def fetch_units(pool: asyncpg.Pool, unit_ids: list[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    if not unit_ids:
        return {}
    rows = await pool.fetch(_UNITS_WITH_NAMES, unit_ids)
    return {row["id"]: row for row in rows}


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


_DATES = ("occurred_start", "occurred_end", "mentioned_at")


@functools.lru_cache(maxsize=4096)
def _stored_iso(value: datetime) -> str:
    """A stored timestamp's ISO form. Cached: a recall formats one to three for each of ~300 results,
    and the facts of one retain share theirs (~50 distinct values in 10,000 results of a bulk-loaded
    bank). asyncpg reads every timestamptz as UTC, so equal values always print alike."""
    return value.isoformat()


def result_payload(
    row: asyncpg.Record, scores: dict[str, float] | None = None, names: list[str] | None = None
) -> dict[str, Any]:
    """A unit as a recall result, as JSON-ready data with no null fields (what the API sends; fields in
    RecallResult's order). Entity names from `names`, else from the row's `entity_names`.

    Plain data, not a RecallResult: a recall returns ~200 results, and building and then serialising
    that many models was the largest share of the server's work per recall."""
    result: dict[str, Any] = {"id": str(row["id"]), "text": row["text"], "type": row["fact_type"]}
    if names is None:
        names = row.get("entity_names")
    if names:
        result["entities"] = list(names)
    if row["context"] is not None:
        result["context"] = row["context"]
    for column in _DATES:
        if (value := row[column]) is not None:
            result[column] = _stored_iso(value)
    if row["document_id"] is not None:
        result["document_id"] = row["document_id"]
    if metadata := row["metadata"]:
        result["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    if row["chunk_id"] is not None:
        result["chunk_id"] = row["chunk_id"]
    if tags := row["tags"]:
        result["tags"] = list(tags)
    if sources := row["source_memory_ids"]:
        result["source_fact_ids"] = [str(s) for s in sources]
    if scores is not None:
        result["scores"] = scores
    return result

