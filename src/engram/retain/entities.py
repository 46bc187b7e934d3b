"""Entity resolution at retain time: each fact's entity names become entity ids of the bank.

A name that matches an entity exactly (case-insensitive) is that entity. Otherwise the bank's
trigram-similar entities are scored (entity_scoring) against the mention's context; the best match
at ≥ 0.6 wins, else the name is new. New names of one retain that look alike merge, and the unique
index on (bank, lower(name)) makes concurrent retains converge on one row per name."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg

from engram.retain import entity_scoring as scoring
from engram.store import entities as store


@dataclass
class Mention:
    unit_id: uuid.UUID
    names: list[str]
    resolve: bool = True  # False: exact names only, never a fuzzy match
    labels: list[str] = field(default_factory=list)  # `key:value` label entities: exact names only


async def store_entities(conn: asyncpg.Connection, bank_id: str, mentions: list[Mention]) -> None:
    now = datetime.now(UTC)
    links = await _label_links(conn, bank_id, mentions, now)
    links.update(await _free_form_links(conn, bank_id, mentions, now))
    # One call, so co-occurrences are counted across labels and free-form entities alike.
    await store.link_units_to_entities(conn, bank_id, [(u, e, name) for (u, e), name in links.items()])


Links = dict[tuple[uuid.UUID, uuid.UUID], str]


async def _free_form_links(conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], now: datetime) -> Links:
    names = {name.lower(): name for m in mentions for name in m.names if name.strip()}
    if not names:
        return {}
    exact = await store.find_by_names(conn, bank_id, list(names))
    canonical = {key: row["canonical_name"] for key, row in exact.items()}
    fuzzy_keys = {key for m in mentions if m.resolve for key in (n.lower() for n in m.names) if key not in exact}
    if fuzzy_keys:
        canonical.update(await _resolve_fuzzy(conn, bank_id, mentions, fuzzy_keys, exact, now))
    new_names = [names[key] for key in names if key not in canonical]
    merged = await asyncio.to_thread(scoring.merge_batch_names, new_names)  # CPU-bound on big batches
    canonical.update(merged)
    spellings = list(dict.fromkeys(canonical.values()))
    ids = await store.upsert_entities(conn, bank_id, spellings, ["free"] * len(spellings), now)
    links: Links = {}
    for m in mentions:
        for name in m.names:
            if name.lower() in canonical:
                links.setdefault((m.unit_id, ids[canonical[name.lower()].lower()]), name)
    return links


async def _label_links(conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], now: datetime) -> Links:
    """Label entities resolve by exact name only: never fuzzily, never into a free-form entity."""
    labels = list(dict.fromkeys(label for m in mentions for label in m.labels))
    if not labels:
        return {}
    ids = await store.upsert_entities(conn, bank_id, labels, ["label"] * len(labels), now)
    return {(m.unit_id, ids[label.lower()]): label for m in mentions for label in m.labels}


async def _resolve_fuzzy(
    conn: asyncpg.Connection,
    bank_id: str,
    mentions: list[Mention],
    keys: set[str],
    exact: dict[str, asyncpg.Record],
    now: datetime,
) -> dict[str, str]:
    """Map each name in `keys` to the canonical name of the existing entity it resolves to, if any."""
    candidates = await store.trigram_candidates(conn, bank_id, sorted(keys), scoring.CANDIDATE_SIMILARITY)
    if not candidates:
        return {}
    candidate_ids = list({row["id"] for rows in candidates.values() for row in rows})
    partners = await store.cooccurrence_partners(conn, candidate_ids)
    degree = {row["id"]: row["mention_count"] for row in exact.values()}
    # The known entities mentioned beside each name (the keys are never known themselves), built in
    # one pass: looking them up per key went over every mention for every key.
    beside: dict[str, set[uuid.UUID]] = {}
    for m in mentions:
        lowered = {n.lower() for n in m.names}
        known = {exact[other]["id"] for other in lowered if other in exact}
        for name in lowered:
            beside.setdefault(name, set()).update(known)
    resolved: dict[str, str] = {}
    for key, rows in candidates.items():
        neighbours = beside.get(key, set())
        options = [
            scoring.Candidate(
                id=row["id"],
                name=row["canonical_name"],
                similarity=row["similarity"],
                last_seen=row["last_seen"],
                partners=partners.get(row["id"], set()),
            )
            for row in rows
        ]
        match = scoring.best_match(key, options, neighbours, degree, now)
        if match is not None:
            resolved[key] = match[0].name
    return resolved
