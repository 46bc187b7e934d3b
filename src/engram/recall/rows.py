"""Loading candidate memory units with what a recall result shows, and shaping them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from engram.types import RecallResult, RecallScores

CANDIDATE_COLUMNS = """
    m.id, m.text, m.fact_type, m.context, m.occurred_start, m.occurred_end, m.mentioned_at, m.created_at,
    m.document_id, m.metadata, m.chunk_id, m.tags, m.source_memory_ids, m.proof_count, m.token_count
"""
UNIT_COLUMNS = CANDIDATE_COLUMNS + """,
    ARRAY(SELECT e.canonical_name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
          WHERE ue.unit_id = m.id ORDER BY e.canonical_name) AS entity_names
"""


async def fetch_candidates(
    pool: asyncpg.Pool, unit_ids: list[uuid.UUID], query_vector: Any
) -> dict[uuid.UUID, asyncpg.Record]:
    """What scoring, the budget and the results need. Entity names come in the same round trip: most
    candidates are kept (a budget of 4,096 tokens holds ~200 short facts), so a second query for the
    kept ones cost more than the names of the few dropped."""
    if not unit_ids:
        return {}
    rows = await pool.fetch(
        f"SELECT {UNIT_COLUMNS}, 1 - (m.embedding <=> $2::vector) AS similarity"
        " FROM memory_units m WHERE m.id = ANY($1::uuid[])",
        unit_ids,
        query_vector,
    )
    return {row["id"]: row for row in rows}


async def fetch_units(pool: asyncpg.Pool, unit_ids: list[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    if not unit_ids:
        return {}
    rows = await pool.fetch(f"SELECT {UNIT_COLUMNS} FROM memory_units m WHERE m.id = ANY($1::uuid[])", unit_ids)
    return {row["id"]: row for row in rows}


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def to_result(
    row: asyncpg.Record, scores: RecallScores | None = None, names: list[str] | None = None
) -> RecallResult:
    """A unit as a recall result; entity names from `names`, else from the row's `entity_names`."""
    if names is None:
        names = list(row["entity_names"]) if "entity_names" in row.keys() else []
    return RecallResult(
        id=str(row["id"]),
        text=row["text"],
        type=row["fact_type"],
        entities=names or None,
        context=row["context"],
        occurred_start=iso(row["occurred_start"]),
        occurred_end=iso(row["occurred_end"]),
        mentioned_at=iso(row["mentioned_at"]),
        document_id=row["document_id"],
        metadata={str(k): str(v) for k, v in (row["metadata"] or {}).items()} or None,
        chunk_id=row["chunk_id"],
        tags=list(row["tags"]) or None,
        source_fact_ids=[str(s) for s in row["source_memory_ids"]] or None,
        scores=scores,
    )
