"""The facts an observation rests on, newest first, for the consolidation prompt.

An observation's `source_memory_ids` is a set (rewrites store it de-duplicated, in id order), so
"newest" comes from the facts themselves: when they were said, else when they were stored."""

from __future__ import annotations

import uuid

from engram.store.tx import Conn

_NEWEST_SOURCES = """
    SELECT o.observation_id, s.text
    FROM unnest($1::uuid[]) AS o(observation_id)
    CROSS JOIN LATERAL (
        SELECT m.text, coalesce(m.mentioned_at, m.created_at) AS said, m.created_at, m.id
        FROM memory_units obs JOIN memory_units m ON m.id = ANY(obs.source_memory_ids)
        WHERE obs.id = o.observation_id
        ORDER BY said DESC, m.created_at DESC, m.id DESC
        LIMIT $2
    ) s
    ORDER BY o.observation_id, s.said DESC, s.created_at DESC, s.id DESC
"""


async def newest_sources(
    conn: Conn, observation_ids: list[uuid.UUID], per_observation: int
) -> dict[uuid.UUID, list[str]]:
    """Up to `per_observation` source texts of each observation, newest first."""
    shown: dict[uuid.UUID, list[str]] = {oid: [] for oid in observation_ids}
    if observation_ids:
        for row in await conn.fetch(_NEWEST_SOURCES, observation_ids, per_observation):
            shown[row["observation_id"]].append(row["text"])
    return shown
