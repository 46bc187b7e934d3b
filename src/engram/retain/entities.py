"""Entity resolution at retain time: each fact's entity names become entity ids of the bank.

A free-form name is scored (entity_scoring) against the bank's trigram-similar free-form entities,
its exact namesakes included: the best match at ≥ 0.6 wins, else the name is a new entity. So the
same name in an unrelated context, long after, is someone new ("Jordan" the baker is not "Jordan"
at Google), and names are not unique in a bank. Exact names only, never a fuzzy match: label
entities, names of a configured label group's `key:value` shape, "user", and mentions with
`resolve_entities: false`. A free-form entity carrying a label's exact name becomes that label.
A name about to be created (and every label) is locked per (bank, lower(name)) until the
transaction ends and resolved again, so concurrent retains of one new name converge: the second one
scores the first one's entity like any other. Names that resolve to an existing entity take no lock.
The second resolution re-reads exact namesakes only: the trigram-similar names it would search again
were searched moments before, and the lock does not cover them anyway (a similar name another retain
creates meanwhile may commit just after either search)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg

from engram import cpu_priority
from engram.retain import entity_scoring as scoring
from engram.store import entities as store
from engram.store.writer_locks import lock_names


@dataclass
class Mention:
    unit_id: uuid.UUID
    names: list[str]
    resolve: bool = True  # False: exact names only, never a fuzzy match
    labels: list[str] = field(default_factory=list)  # `key:value` label entities: exact names only
    types: dict[str, str] = field(default_factory=dict)  # name → entity_type (person, place …), when known


# "user" is the extraction prompt's word for the bank's own user, not a name: one entity whatever the
# context, so it is matched exactly like a label rather than scored (which would split it weekly).
EXACT_ONLY_NAMES = frozenset({"user"})

Links = dict[tuple[uuid.UUID, uuid.UUID], str]
Existing = dict[str, list[asyncpg.Record]]
# Each lower-cased name's trigram-similar free-form entities, as one retain found them (`_resolve_scored`).
Similar = dict[str, list[asyncpg.Record]]


@dataclass
class Reading:
    """What `read_entities` found for a retain's mentions, before any lock: the entities of their exact
    names (`existing`; the labels among them in `label_ids`), each free-form name's spelling, the
    trigram-similar names searched (`similar`) and the existing entity each name resolved to (`chosen`)."""
    keys: list[str]
    existing: Existing = field(default_factory=dict)
    label_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    spelling: dict[str, str] = field(default_factory=dict)
    similar: Similar = field(default_factory=dict)
    chosen: dict[str, uuid.UUID] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


async def read_entities(
    conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], label_keys: frozenset[str] = frozenset(),
) -> Reading:
    """The reads of resolution, which take no lock: a retain runs them while the embedder works, before
    its facts are stored, and `store_entities` does the rest after them. Only the reads: an entity row
    or a name locked there would stay locked through the facts' insert, and concurrent retains naming
    the same entity ("user", a label) would wait that much longer for each other (8 clients into one
    bank: 60–65 retains/s against 68–73)."""
    keys = sorted({name.lower() for m in mentions for name in [*m.names, *m.labels] if name.strip()})
    reading = Reading(keys)
    if not keys:
        return reading
    reading.existing = await store.find_by_names(conn, bank_id, keys)
    reading.label_ids = {key: rows_[0]["id"] for key, rows_ in _labels_only(reading.existing).items()}
    reading.spelling = {name.lower(): name for m in mentions for name in m.names if name.strip()}
    reading.chosen = await _resolve_free(conn, bank_id, mentions, set(reading.spelling), reading.existing,
                                         reading.label_ids, label_keys, reading.now, reading.similar)
    return reading


async def store_entities(
    conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], label_keys: frozenset[str] = frozenset(),
    sole_writer: bool = False, reading: Reading | None = None,
) -> None:
    """Resolve and link every mention; `label_keys` are the bank's label group keys; `reading`: what
    `read_entities` found for these mentions earlier in the transaction (read now if not given).

    Names that resolve to an existing entity need no lock. The names that would be created (and the
    labels) are locked, then resolved again against what concurrent retains created meanwhile, unless
    the caller is the bank's `sole_writer` (an import holding the bank's writers lock)."""
    if reading is None:
        reading = await read_entities(conn, bank_id, mentions, label_keys)
    if not reading.keys:
        return
    existing, label_ids, spelling, similar, chosen, now = (
        reading.existing, reading.label_ids, reading.spelling, reading.similar, reading.chosen, reading.now)
    labels = {label.lower() for m in mentions for label in m.labels}
    pending = {key for key in spelling if key not in chosen}
    if (pending or labels) and not sole_writer:
        await lock_names(conn, bank_id, sorted(pending | labels))
        existing = {**existing, **await store.find_by_names(conn, bank_id, sorted(pending | labels))}
        label_ids.update({key: rows_[0]["id"] for key, rows_ in _labels_only(existing).items()})
    links = await _label_links(conn, bank_id, mentions, existing, label_ids, now)
    chosen.update({key: label_ids[key] for key in spelling if key in label_ids})  # a label's exact name is it
    if pending - chosen.keys():
        chosen.update(await _resolve_free(conn, bank_id, mentions, pending - chosen.keys(), existing, label_ids,
                                          label_keys, now, similar))
    links.update(await _free_form_links(conn, bank_id, mentions, spelling, chosen, label_ids, label_keys, now))
    # One call, so co-occurrences are counted across labels and free-form entities alike.
    await store.link_units_to_entities(conn, bank_id, [(u, e, name) for (u, e), name in links.items()])


async def _resolve_free(
    conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], keys: set[str], existing: Existing,
    label_ids: dict[str, uuid.UUID], label_keys: frozenset[str], now: datetime, similar: Similar,
) -> dict[str, uuid.UUID]:
    """The existing entity each free-form name in `keys` is, where one is (reads only; the names'
    trigram searches are kept in `similar`, and a name already in it is not searched again)."""
    chosen = {key: label_ids[key] for key in keys if key in label_ids}
    scored = {
        key for m in mentions if m.resolve for key in (n.lower() for n in m.names)
        if key in keys and key not in chosen and key not in EXACT_ONLY_NAMES and not label_shaped(key, label_keys)
    }
    for key in keys - chosen.keys() - scored:  # exact names only
        free = [row for row in existing.get(key, []) if row["entity_kind"] == "free"]
        if free:
            chosen[key] = free[0]["id"]
    if scored:
        chosen.update(await _resolve_scored(conn, bank_id, mentions, scored, existing, label_keys, now, similar))
    return chosen


def _labels_only(existing: Existing) -> Existing:
    found = {key: [r for r in rows if r["entity_kind"] == "label"] for key, rows in existing.items()}
    return {key: rows for key, rows in found.items() if rows}


def label_shaped(name: str, label_keys: frozenset[str]) -> bool:
    """`priority:urgen` in a bank with a `priority` group: an identifier, matched exactly or not at all."""
    head, colon, _ = name.partition(":")
    return bool(colon) and head.strip().lower() in label_keys


async def _label_links(
    conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], existing: Existing,
    label_ids: dict[str, uuid.UUID], now: datetime,
) -> Links:
    """Label entities resolve by exact name only: never fuzzily. A free-form entity of the same name
    (one a caller supplied, say) is promoted to the label, so no typo can be merged into it later."""
    labels = {label.lower(): label for m in mentions for label in m.labels}
    promote = []
    for key in labels:
        if key not in label_ids and existing.get(key):
            label_ids[key] = existing[key][0]["id"]
            promote.append(label_ids[key])
    await store.promote_to_label(conn, promote)
    seen = [label_ids[key] for key in labels if key in label_ids]
    await store.touch_entities(conn, seen, [None] * len(seen), now)
    new = [key for key in labels if key not in label_ids]
    ids = await store.insert_entities(conn, bank_id, [(labels[k], "label", None) for k in new], now)
    label_ids.update(zip(new, ids, strict=True))
    return {(m.unit_id, label_ids[label.lower()]): label for m in mentions for label in m.labels}


async def _free_form_links(
    conn: asyncpg.Connection, bank_id: str, mentions: list[Mention], spelling: dict[str, str],
    chosen: dict[str, uuid.UUID], label_ids: dict[str, uuid.UUID], label_keys: frozenset[str], now: datetime,
) -> Links:
    """Create the names no entity claimed (alike new names of the batch as one), then link all."""
    if not spelling:
        return {}
    types: dict[str, str] = {}
    for m in mentions:
        for name, kind in m.types.items():
            types.setdefault(name.lower(), kind)
    new_keys = [key for key in spelling if key not in chosen]
    fuzzy = [spelling[key] for key in new_keys if not label_shaped(key, label_keys)]
    merged = {key: spelling[key] for key in new_keys} | await cpu_priority.to_thread(scoring.merge_batch_names, fuzzy)
    heads = list(dict.fromkeys(merged.values()))
    head_type = {}
    for key, head in merged.items():
        if key in types:
            head_type.setdefault(head, types[key])
    ids = await store.insert_entities(conn, bank_id, [(h, "free", head_type.get(h)) for h in heads], now)
    head_id = dict(zip(heads, ids, strict=True))
    old = [key for key in chosen if key not in label_ids]
    await store.touch_entities(conn, [chosen[k] for k in old], [types.get(k) for k in old], now)
    chosen.update({key: head_id[merged[key]] for key in new_keys})
    links: Links = {}
    for m in mentions:
        for name in m.names:
            if name.lower() in chosen:
                links.setdefault((m.unit_id, chosen[name.lower()]), name)
    return links


async def _resolve_scored(
    conn: asyncpg.Connection,
    bank_id: str,
    mentions: list[Mention],
    keys: set[str],
    existing: Existing,
    label_keys: frozenset[str],
    now: datetime,
    similar: Similar,
) -> dict[str, uuid.UUID]:
    """Map each name in `keys` to the existing free-form entity it resolves to, if any, scored on
    name, co-occurrence and recency. Exact namesakes are scored first; only a name none of them
    claims looks further, at trigram-similar names (the costly nearest-name search, once a name in a
    retain: `similar` keeps what it found)."""
    known = {key: rows[0] for key, rows in existing.items()}  # a neighbour name: its most mentioned entity
    degree = {row["id"]: row["mention_count"] for row in known.values()}
    namesakes = {
        key: [(row, 1.0) for row in existing.get(key, []) if row["entity_kind"] == "free"] for key in keys
    }
    resolved = await _best_of(conn, mentions, {k: v for k, v in namesakes.items() if v}, known, degree, now)
    rest = sorted(keys - resolved.keys())
    if rest:
        unsearched = [key for key in rest if key not in similar]
        if unsearched:
            found = await store.trigram_candidates(conn, bank_id, unsearched, scoring.CANDIDATE_SIMILARITY)
            similar.update({key: found.get(key, []) for key in unsearched})
        candidates = {
            key: [(row, row["similarity"]) for row in similar[key]
                  if not label_shaped(row["canonical_name"], label_keys)]
            for key in rest if similar[key]
        }
        resolved.update(await _best_of(conn, mentions, candidates, known, degree, now))
    return resolved


async def _best_of(
    conn: asyncpg.Connection,
    mentions: list[Mention],
    candidates: dict[str, list[tuple[asyncpg.Record, float]]],
    known: dict[str, asyncpg.Record],
    degree: dict[uuid.UUID, int],
    now: datetime,
) -> dict[str, uuid.UUID]:
    """For each name, the id of its best candidate (entity row, name similarity) at ≥ the threshold."""
    # Only the candidates that pass the name gate are scored (`best_match` skips the others), so only
    # theirs are kept, and their partners read only among the neighbours of a name they are scored for.
    scored = {key: [(row, similarity) for row, similarity in rows
                    if scoring.may_match(key, row["canonical_name"], similarity)]
              for key, rows in candidates.items()}
    if not any(scored.values()):
        return {}
    # The known entities mentioned beside each name, built in one pass: looking them up per key went
    # over every mention for every key.
    beside: dict[str, set[uuid.UUID]] = {}
    for m in mentions:
        lowered = {n.lower() for n in m.names}
        known_here = {other: known[other]["id"] for other in lowered if other in known}
        for name in lowered:
            beside.setdefault(name, set()).update(i for other, i in known_here.items() if other != name)
    asked = {key: rows for key, rows in scored.items() if rows and beside.get(key)}
    partners = await store.cooccurrence_partners(
        conn, sorted({row["id"] for rows in asked.values() for row, _ in rows}),
        sorted({n for key in asked for n in beside[key]})) if asked else {}
    resolved: dict[str, uuid.UUID] = {}
    for key, rows in scored.items():
        options = [
            scoring.Candidate(id=row["id"], name=row["canonical_name"], similarity=similarity,
                              last_seen=row["last_seen"], partners=partners.get(row["id"], set()))
            for row, similarity in rows
        ]
        match = scoring.best_match(key, options, beside.get(key, set()), degree, now)
        if match is not None:
            resolved[key] = match[0].id
    return resolved
