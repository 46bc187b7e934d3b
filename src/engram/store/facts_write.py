"""Batch writes of retained facts: documents, chunks, memory units, entities and their links.
Every function runs inside the caller's transaction and does one round trip (arrays + unnest)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

import asyncpg

from engram.store.instants import storable as storable_instant
from engram.store.keyword_frequencies import facts_of_types
from engram.store.pool import encode_vector
from engram.store.storable import storable, storable_text
from engram.store.vector_index import indexed_distance
from engram.types.memory import FactType


@dataclass
class UnitRow:
    """One memory unit ready to insert."""

    id: uuid.UUID
    document_id: str | None
    chunk_id: str | None
    text: str
    context: str | None
    fact_type: str
    fact_kind: str | None
    embedding: Any
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    tags: list[str]
    metadata: dict[str, Any]
    observation_scopes: Any
    token_count: int | None = None
    lead_in: str | None = None
    # As an archive restores them (a retain leaves the defaults): set at insert, because updating
    # 100,000 facts afterwards rewrote every row and its vector index entry (minutes).
    created_at: datetime | None = None  # None: now
    state: str = "valid"
    invalidation_reason: str | None = None
    invalidated_at: datetime | None = None
    edited_at: datetime | None = None


async def existing_chunks(conn: asyncpg.Connection, bank_id: str, document_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id, chunk_index, content_hash FROM chunks WHERE bank_id = $1 AND document_id = $2"
        " ORDER BY chunk_index",
        bank_id,
        document_id,
    )


async def existing_chunks_of(
    conn: asyncpg.Connection, bank_id: str, document_ids: list[str]
) -> dict[str, list[asyncpg.Record]]:
    """`existing_chunks` of several documents in one round trip (a document with none is absent)."""
    rows = await conn.fetch(
        "SELECT document_id, id, chunk_index, content_hash FROM chunks WHERE bank_id = $1"
        " AND document_id = ANY($2::text[]) ORDER BY document_id, chunk_index",
        bank_id,
        document_ids,
    )
    found: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        found.setdefault(row["document_id"], []).append(row)
    return found


async def get_document_text(conn: asyncpg.Connection, bank_id: str, document_id: str) -> str | None:
    return await conn.fetchval(
        "SELECT original_text FROM documents WHERE bank_id = $1 AND id = $2", bank_id, document_id
    )


async def upsert_document(
    conn: asyncpg.Connection,
    bank_id: str,
    document_id: str,
    *,
    original_text: str | None,
    content_hash: str,
    tags: list[str],
    metadata: dict[str, Any] | None,
    retain_params: dict[str, Any],
    observation_scopes: Any,
) -> None:
    await upsert_documents(conn, bank_id, [{
        "id": document_id, "original_text": original_text, "content_hash": content_hash, "tags": tags,
        "metadata": metadata, "retain_params": retain_params, "observation_scopes": observation_scopes,
    }])


def upsert_documents_sql(bank: str, documents: str) -> str:
    """The statement of `upsert_documents`, its bank id and documents given as placeholders (to write
    them in one statement with other rows: `retain.fresh_documents`)."""
    return f"""
        INSERT INTO documents (bank_id, id, original_text, content_hash, tags, metadata, retain_params,
                               observation_scopes)
        SELECT {bank}, d->>'id', d->>'original_text', d->>'content_hash',
               ARRAY(SELECT jsonb_array_elements_text(coalesce(d->'tags', '[]'))),
               NULLIF(d->'metadata', 'null'::jsonb), NULLIF(d->'retain_params', 'null'::jsonb),
               NULLIF(d->'observation_scopes', 'null'::jsonb)
        FROM jsonb_array_elements({documents}::jsonb) AS d
        ON CONFLICT (bank_id, id) DO UPDATE SET
            original_text = excluded.original_text, content_hash = excluded.content_hash,
            tags = excluded.tags, metadata = excluded.metadata, retain_params = excluded.retain_params,
            observation_scopes = excluded.observation_scopes, updated_at = now()
    """


async def upsert_documents(conn: asyncpg.Connection, bank_id: str, documents: list[dict[str, Any]]) -> None:
    """Documents' rows, inserted or replaced, in one statement. Each dict holds the columns by name (id,
    original_text, content_hash, tags, metadata, retain_params, observation_scopes); a JSON array
    carries them, since PostgreSQL arrays cannot hold per-document lists and objects side by side."""
    await conn.execute(upsert_documents_sql("$1", "$2"), bank_id, documents)


async def delete_document_units_except(
    conn: asyncpg.Connection, bank_id: str, document_id: str, keep_chunk_ids: list[str]
) -> list[uuid.UUID]:
    """Delete the document's facts and chunks not in `keep_chunk_ids`; returns the deleted unit ids."""
    from engram.store.memories import delete_units_where

    deleted = await delete_units_where(
        conn,
        "m.bank_id = $1 AND m.document_id = $2 AND (m.chunk_id IS NULL OR NOT (m.chunk_id = ANY($3::text[])))",
        bank_id,
        document_id,
        keep_chunk_ids,
    )
    await conn.execute(
        "DELETE FROM chunks WHERE bank_id = $1 AND document_id = $2 AND NOT (id = ANY($3::text[]))",
        bank_id,
        document_id,
        keep_chunk_ids,
    )
    return deleted


async def reindex_chunks(conn: asyncpg.Connection, chunk_ids: list[str], indexes: list[int]) -> None:
    await conn.execute(
        "UPDATE chunks c SET chunk_index = u.idx FROM unnest($1::text[], $2::int[]) AS u(id, idx)"
        " WHERE c.id = u.id",
        chunk_ids,
        indexes,
    )


async def insert_chunks(
    conn: asyncpg.Connection,
    bank_id: str,
    document_id: str,
    chunks: list[tuple[str, int, str, str]],
) -> None:
    """One document's chunks: (id, chunk_index, text, content_hash)."""
    await insert_chunks_of_documents(conn, bank_id, [(id_, document_id, *rest) for id_, *rest in chunks])


def insert_chunks_sql(bank: str, columns: list[str]) -> str:
    """The statement of `insert_chunks_of_documents`, its bank id and the chunks' five columns (arrays of
    ids, document ids, indexes, texts, hashes) given as placeholders."""
    ids, documents, indexes, texts, hashes = columns
    return f"""
        INSERT INTO chunks (id, bank_id, document_id, chunk_index, chunk_text, content_hash)
        SELECT u.id, {bank}, u.doc, u.idx, u.txt, u.hash
        FROM unnest({ids}::text[], {documents}::text[], {indexes}::int[], {texts}::text[], {hashes}::text[])
             AS u(id, doc, idx, txt, hash)
    """


def chunk_columns(chunks: list[tuple[str, str, int, str, str]]) -> list[list[Any]]:
    """(id, document_id, chunk_index, text, content_hash) rows as the five arrays `insert_chunks_sql` takes."""
    return [list(column) for column in zip(*chunks, strict=True)]


async def insert_chunks_of_documents(
    conn: asyncpg.Connection, bank_id: str, chunks: list[tuple[str, str, int, str, str]]
) -> None:
    """Chunks of several documents in one statement. chunks: (id, document_id, chunk_index, text, content_hash)."""
    if not chunks:
        return
    await conn.execute(insert_chunks_sql("$1", ["$2", "$3", "$4", "$5", "$6"]), bank_id, *chunk_columns(chunks))


async def insert_units(conn: asyncpg.Connection, bank_id: str, units: list[UnitRow]) -> None:
    if not units:
        return
    await conn.execute(
        """
        INSERT INTO memory_units (id, bank_id, document_id, chunk_id, text, context, fact_type, fact_kind,
                                  embedding, occurred_start, occurred_end, mentioned_at, tags, metadata,
                                  observation_scopes, token_count, lead_in, created_at, state,
                                  invalidation_reason, invalidated_at, edited_at)
        SELECT u.id, $1, u.document_id, u.chunk_id, u.text, u.context, u.fact_type, u.fact_kind,
               u.embedding, u.occurred_start, u.occurred_end, u.mentioned_at,
               ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), u.metadata::jsonb,
               nullif(u.scopes, 'null')::jsonb,
               u.token_count, u.lead_in, coalesce(u.created_at, now()), u.state,
               u.invalidation_reason, u.invalidated_at, u.edited_at
        FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                    $9::vector[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::text[],
                    $14::text[], $15::text[], $16::int[], $17::text[], $18::timestamptz[], $19::text[],
                    $20::text[], $21::timestamptz[], $22::timestamptz[])
          AS u(id, document_id, chunk_id, text, context, fact_type, fact_kind, embedding, occurred_start,
               occurred_end, mentioned_at, tags, metadata, scopes, token_count, lead_in, created_at, state,
               invalidation_reason, invalidated_at, edited_at)
        """,
        bank_id,
        [u.id for u in units],
        [u.document_id for u in units],
        [u.chunk_id for u in units],
        [storable_text(u.text) for u in units],
        [None if u.context is None else storable_text(u.context) for u in units],
        [u.fact_type for u in units],
        [u.fact_kind for u in units],
        [encode_vector(u.embedding) for u in units],
        # One microsecond inside the calendar: its exact ends would be stored as ±infinity.
        [storable_instant(u.occurred_start) for u in units],
        [storable_instant(u.occurred_end) for u in units],
        [storable_instant(u.mentioned_at) for u in units],
        # JSON travels as text: asyncpg would read a list inside the array as a second dimension.
        [json.dumps(storable(u.tags)) for u in units],
        [json.dumps(storable(u.metadata)) for u in units],
        [json.dumps(u.observation_scopes) for u in units],
        [u.token_count for u in units],
        [u.lead_in for u in units],
        [u.created_at for u in units],
        [u.state for u in units],
        [u.invalidation_reason for u in units],
        [u.invalidated_at for u in units],
        [u.edited_at for u in units],
    )


async def insert_sentence_vectors(
    conn: asyncpg.Connection, bank_id: str, vectors: list[tuple[uuid.UUID, Any]]
) -> None:
    """The sentence vectors of facts that have several sentences, as (unit id, vector or its literal)."""
    if not vectors:
        return
    await conn.execute(
        """
        INSERT INTO memory_unit_sentences (unit_id, bank_id, embedding)
        SELECT v.unit_id, $1, v.embedding
        FROM unnest($2::uuid[], $3::vector[]) AS v(unit_id, embedding)
        """,
        bank_id,
        [unit_id for unit_id, _ in vectors],
        [encode_vector(vector) for _, vector in vectors],
    )


async def insert_causal_links(
    conn: asyncpg.Connection, bank_id: str, pairs: list[tuple[uuid.UUID, uuid.UUID]]
) -> None:
    """pairs: (effect, cause). Causal links weigh 1.0."""
    if not pairs:
        return
    await conn.execute(
        """
        INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
        SELECT u.a, u.b, $1, 'causal', 1.0 FROM unnest($2::uuid[], $3::uuid[]) AS u(a, b)
        ON CONFLICT DO NOTHING
        """,
        bank_id,
        [a for a, _ in pairs],
        [b for _, b in pairs],
    )


async def insert_temporal_links(
    conn: asyncpg.Connection, bank_id: str, unit_ids: list[uuid.UUID], *, window_hours: float = 24,
    per_unit: int = 20,
) -> None:
    """Link each new unit to up to `per_unit` units of the same type whose time is within the window,
    weight max(0.3, 1 - Δh/window). The nearest are among the `per_unit` nearest before it and the
    `per_unit` nearest after it, each read in order from memory_units_said_time (migration 014), so a
    new unit costs two short index scans, not a pass over the bank."""
    if not unit_ids:
        return
    await conn.execute(
        """
        INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
        SELECT n.id, near.id, $1, 'temporal', greatest(0.3, 1 - near.dh / $3)
        FROM memory_units n
        CROSS JOIN LATERAL (
            SELECT c.id, abs(extract(epoch FROM c.said - coalesce(n.occurred_start, n.mentioned_at))) / 3600 AS dh
            FROM (
                (SELECT o.id, coalesce(o.occurred_start, o.mentioned_at) AS said
                 FROM memory_units o
                 WHERE o.bank_id = $1 AND o.fact_type = n.fact_type AND o.id <> n.id
                   AND coalesce(o.occurred_start, o.mentioned_at) BETWEEN
                       coalesce(n.occurred_start, n.mentioned_at) - make_interval(hours => $3::int)
                       AND coalesce(n.occurred_start, n.mentioned_at)
                 ORDER BY coalesce(o.occurred_start, o.mentioned_at) DESC
                 LIMIT $4)
                UNION
                (SELECT o.id, coalesce(o.occurred_start, o.mentioned_at)
                 FROM memory_units o
                 WHERE o.bank_id = $1 AND o.fact_type = n.fact_type AND o.id <> n.id
                   AND coalesce(o.occurred_start, o.mentioned_at) BETWEEN
                       coalesce(n.occurred_start, n.mentioned_at)
                       AND coalesce(n.occurred_start, n.mentioned_at) + make_interval(hours => $3::int)
                 ORDER BY coalesce(o.occurred_start, o.mentioned_at)
                 LIMIT $4)
            ) c
            ORDER BY 2
            LIMIT $4
        ) near
        WHERE n.id = ANY($2::uuid[]) AND coalesce(n.occurred_start, n.mentioned_at) IS NOT NULL
        ON CONFLICT DO NOTHING
        """,
        bank_id,
        unit_ids,
        window_hours,
        per_unit,
    )


# Each new unit ($2) linked to its `per_unit` ($4) nearest candidates at least $3 alike, in bank $1.
_LINK_NEAREST = """
    {with_clause}
    INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight)
    SELECT n.id, near.id, $1, 'semantic', near.similarity
    FROM memory_units n
    CROSS JOIN LATERAL (
        SELECT o.id, 1 - (o.embedding <=> n.embedding) AS similarity
        FROM {candidates}
        ORDER BY {distance}{order}
        LIMIT $4
    ) near
    WHERE n.id = ANY($2::uuid[]) AND near.similarity >= $3
    ON CONFLICT DO NOTHING
"""

# The new facts one statement links (~1 ms each through the index): a retain of one 2 MB document has
# ~33,000, and a statement's time is bounded (the pool's 300 s `command_timeout`).
LINK_STATEMENT_FACTS = 2_000

# A bank this small is searched exactly for its semantic links: reading its rows once costs well under a
# millisecond. Through the HNSW index, filtered to the bank, a small bank beside larger ones has the
# other banks' vectors walked first (two facts of a 470-fact bank stored beside 8,000 others: 11.9 ms,
# against 0.8 ms with the bank alone); alone in the table it is found as fast, but the search needs
# the planner's settings set before it and reset after (`hnsw_link_settings`): two more round trips of
# a sync retain's transaction, one more of each side connection of a bulk one (bulk calls of 100
# harness items into a bank growing to 1,000 facts, with session 45's other changes: PostgreSQL's CPU
# an item 0-0.14 ms lower in six paired runs, bench/README.md).
EXACT_LINKS_MAX_FACTS = 1_000
# The two ways to read the bank's facts for their nearest: `BANK_FACTS` read once (a CTE; exact), or
# `INDEXED_FACTS` through the HNSW index (ordered by `indexed_distance`) once `hnsw_link_settings` has
# set the transaction up for it.
BANK_FACTS = """WITH bank_facts AS MATERIALIZED (  -- read once for every new unit
    SELECT id, embedding FROM memory_units WHERE bank_id = $1 AND fact_type <> 'observation')"""
INDEXED_FACTS = "memory_units o WHERE o.bank_id = $1 AND o.fact_type <> 'observation'"

# The links of the new facts in $2: the bank's facts read once and sorted exactly, or searched through
# the HNSW index (`insert_semantic_links`).
_LINK_NEAREST_EXACTLY = _LINK_NEAREST.format(
    with_clause=BANK_FACTS, candidates="bank_facts o WHERE o.id <> n.id", distance="o.embedding <=> n.embedding",
    order=", o.id")
_LINK_NEAREST_INDEXED = _LINK_NEAREST.format(
    with_clause="", candidates=f"{INDEXED_FACTS} AND o.id <> n.id",
    distance=indexed_distance("o.embedding", "n.embedding"), order="")


def hnsw_link_settings(per_unit: int) -> str:
    """The transaction's settings for an HNSW link search (see `insert_semantic_links`)."""
    return f"SET LOCAL enable_sort = off; SET LOCAL hnsw.ef_search = {int(per_unit) + 1}"


def links_searched_exactly(bank_facts: int) -> bool:
    """Whether a bank of `bank_facts` facts gets its semantic links from an exact search."""
    return 0 < bank_facts <= EXACT_LINKS_MAX_FACTS


# The facts the links are searched among: every fact but observations.
LINKED_FACT_TYPES = [t for t in get_args(FactType) if t != "observation"]


async def semantic_search_is_exact(conn: asyncpg.Connection, bank_id: str) -> bool:
    """Whether the bank's semantic links come from an exact search (`links_searched_exactly`), by the
    bank's valid facts from the totals migration 022 keeps (with the facts this transaction wrote).
    Counting the bank's rows up to the threshold read 1,001 index entries a retain once a bank had
    grown past it: ~0.6 ms of PostgreSQL on every sync retain's way."""
    bank_facts, _ = await facts_of_types(conn, bank_id, LINKED_FACT_TYPES)
    return links_searched_exactly(bank_facts)


async def insert_semantic_links(
    conn: asyncpg.Connection, bank_id: str, unit_ids: list[uuid.UUID], *, min_similarity: float = 0.7,
    per_unit: int = 50, exact: bool | None = None,
) -> None:
    """Link each new unit to its nearest neighbours in the bank with cosine similarity ≥ min_similarity.

    A small bank (`links_searched_exactly`) is searched exactly: its facts are read once and each new
    unit sorts them by distance. Otherwise the neighbours come from the HNSW index.
    Left to itself, the planner sorts the whole bank by distance for each new unit on banks of a few
    thousand facts (its estimate of the index is cautious): 18 ms a unit at 3,600 facts, growing with
    the bank, against 0.7 ms through the index. Sorting is switched off for that statement, so the
    index, which returns rows in order, wins. The search keeps `per_unit` + 1 candidates (the unit
    itself is the first), not the session's 100: links are approximate anyway, and it was a third of a
    bulk item's PostgreSQL time at 100,000 facts (1.45 against 0.9 ms a unit, 1 % fewer links)."""
    if not unit_ids:
        return
    exact = exact if exact is not None else await semantic_search_is_exact(conn, bank_id)
    if not exact:
        await conn.execute(hnsw_link_settings(per_unit))  # the caller's transaction; back to the session's below
    for start in range(0, len(unit_ids), LINK_STATEMENT_FACTS):
        await conn.execute(_LINK_NEAREST_EXACTLY if exact else _LINK_NEAREST_INDEXED,
                           bank_id, unit_ids[start:start + LINK_STATEMENT_FACTS], min_similarity, per_unit)
    if not exact:
        await conn.execute("SET LOCAL enable_sort TO DEFAULT; SET LOCAL hnsw.ef_search TO DEFAULT")
