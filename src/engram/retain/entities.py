"""Entity resolution at retain time: each fact's entity names become entity ids in the bank."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from engram.store.entities import link_units_to_entities, upsert_entities


async def store_entities(
    conn: asyncpg.Connection, bank_id: str, mentions: list[tuple[uuid.UUID, list[str], bool]]
) -> None:
    """mentions: (unit_id, entity names, resolve). Names resolve to existing entities of the bank by
    case-insensitive name, or become new entities; then mentions and co-occurrences are recorded."""
    names: dict[str, str] = {}
    for _, entity_names, _ in mentions:
        for name in entity_names:
            names.setdefault(name.lower(), name)
    if not names:
        return
    ids = await upsert_entities(
        conn, bank_id, list(names.values()), ["free"] * len(names), datetime.now(UTC)
    )
    pairs = [
        (unit_id, ids[name.lower()])
        for unit_id, entity_names, _ in mentions
        for name in dict.fromkeys(entity_names)
        if name.lower() in ids
    ]
    await link_units_to_entities(conn, bank_id, list(dict.fromkeys(pairs)))
