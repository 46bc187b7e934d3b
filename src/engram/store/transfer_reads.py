"""The reads of a bank export: every table of a bank, or the documents asked for, in a stable order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg

from engram.store.consolidation_status import STATUS_COLUMNS, STATUS_JOIN
from engram.store.tx import Conn, batches_of

_NAMES = """ARRAY(SELECT e.canonical_name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
                 WHERE ue.unit_id = m.id AND e.entity_kind = '{kind}' ORDER BY e.canonical_name)"""


# What an archive's fact carries: not the vector (384 numbers a fact, re-embedded on import) nor the
# keyword index's `search`, which as Python objects were most of an export's memory.
_FACT_COLUMNS = """m.id, m.document_id, m.text, m.context, m.fact_type, m.fact_kind, m.lead_in, m.state, m.tags,
                   m.metadata, m.observation_scopes, m.occurred_start, m.occurred_end, m.mentioned_at, m.created_at,
                   m.edited_at, m.invalidated_at, m.invalidation_reason"""


# A fact's place in its document's list of facts (the archive names a fact by its document and place).
_FACT_ORDER = "ch.chunk_index NULLS LAST, m.created_at, m.id"

def _places(condition: str = "") -> str:
    """Every archived fact's place (its index among its document's facts), computed where the facts
    are: an export once kept them all in a dict (~290 bytes a memory, ~3 GB at 10 million) to name the
    ends of the links and the observations' sources. `condition` may narrow it to whole documents."""
    return f"""places AS (
    SELECT m.id, m.document_id, (row_number() OVER (PARTITION BY m.document_id ORDER BY {_FACT_ORDER}) - 1)::int
               AS fact_index
    FROM memory_units m JOIN documents d ON d.bank_id = m.bank_id AND d.id = m.document_id
    LEFT JOIN chunks ch ON ch.id = m.chunk_id
    WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
      AND ($2::text[] IS NULL OR m.document_id = ANY($2::text[])) {condition})"""


_PLACES = _places()
# The places of the facts in $3 only: their documents' facts are numbered, not the whole bank's.
_PLACES_OF_FACTS = _places("""AND m.document_id IN (
        SELECT document_id FROM memory_units WHERE bank_id = $1 AND id = ANY($3::uuid[]))""")


async def document_count(conn: Conn, bank_id: str, only: list[str] | None) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM documents WHERE bank_id = $1 AND ($2::text[] IS NULL OR id = ANY($2::text[]))",
        bank_id, only,
    )


async def document_batches(
    conn: asyncpg.Connection, bank_id: str, only: list[str] | None, size: int
) -> AsyncIterator[list[asyncpg.Record]]:
    """The bank's documents (or those asked for), `size` at a time from a cursor, oldest first. Needs
    the export's open transaction."""
    query = ("SELECT * FROM documents WHERE bank_id = $1 AND ($2::text[] IS NULL OR id = ANY($2::text[]))"
             " ORDER BY created_at, id")
    async for rows in batches_of(conn, size, query, bank_id, only):
        yield rows


async def chunks_of(conn: Conn, bank_id: str, document_ids: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id, document_id, chunk_index, chunk_text FROM chunks WHERE bank_id = $1"
        " AND document_id = ANY($2::text[]) ORDER BY document_id, chunk_index",
        bank_id, document_ids,
    )


# A fact's causes, read with it through the links' primary key (from_unit, to_unit, link_type). Written
# `link_type = 'causal'`, the planner read every causal link of the bank through `memory_links_bank
# (bank_id, link_type)` for each fact (14 s for 1,000 facts among 300,000 causal links); as `IS TRUE`
# the type is no index's condition, only a filter on the fact's own ~50 links (~5 ms for 1,000 facts).
# An export once held all of a bank's causes in a dict instead: 300,000 of them took ~100 MB, and
# collecting them stalled the server.
_CAUSES = """ARRAY(SELECT l.to_unit FROM memory_links l WHERE l.from_unit = m.id AND (l.link_type = 'causal') IS TRUE
                  ORDER BY l.to_unit)"""


async def facts_of(conn: Conn, bank_id: str, document_ids: list[str]) -> list[asyncpg.Record]:
    """The documents' world and experience facts with their entity names and causes (the facts each
    was caused by), in document and chunk order."""
    return await conn.fetch(
        f"""
        SELECT {_FACT_COLUMNS}, ch.chunk_index, {_NAMES.format(kind='free')} AS free_names,
               {_NAMES.format(kind='label')} AS label_names, {_CAUSES} AS causes, {STATUS_COLUMNS}
        FROM memory_units m LEFT JOIN chunks ch ON ch.id = m.chunk_id {STATUS_JOIN}
        WHERE m.bank_id = $1 AND m.document_id = ANY($2::text[]) AND m.fact_type <> 'observation'
        ORDER BY m.document_id, {_FACT_ORDER}
        """,
        bank_id, document_ids,
    )


# A link as the archive holds it, one JSON object on one line, built by PostgreSQL as it reads the link:
# built in Python (a dict a link, then `json.dumps`) it was ~36 of the ~48 s an export of 5.15 million
# links took, on the export's one core. `to_json` quotes and escapes each string.
_LINK_LINE = """'{"from": {"document_id": ' || to_json(f.document_id)::text || ', "fact_index": ' || f.fact_index
    || '}, "to": {"document_id": ' || to_json(t.document_id)::text || ', "fact_index": ' || t.fact_index
    || '}, "link_type": ' || to_json(l.link_type)::text || ', "weight": ' || to_json(l.weight)::text || '}'"""

_ARCHIVED_LINKS = """FROM memory_links l JOIN places f ON f.id = l.from_unit JOIN places t ON t.id = l.to_unit
        WHERE l.bank_id = $1"""


async def link_count(conn: Conn, bank_id: str, only: list[str] | None) -> int:
    """How many links an export will write: those of the whole bank (one index scan, ~0.3 s at 5
    million, counting the few whose ends are observations), or exactly those between the facts of
    the documents asked for."""
    if only is None:
        return await conn.fetchval("SELECT count(*) FROM memory_links WHERE bank_id = $1", bank_id)
    return await conn.fetchval(f"WITH {_PLACES} SELECT count(*) {_ARCHIVED_LINKS}", bank_id, only)


async def link_lines(
    conn: asyncpg.Connection, bank_id: str, only: list[str] | None, size: int
) -> AsyncIterator[list[str]]:
    """The links between two archived facts (of the documents asked for, or all), each a line of
    `links.json` naming its ends by their documents and places, `size` at a time from a cursor (~50
    links a memory: 5 million at 100,000 memories). Needs the export's open transaction."""
    query = f"WITH {_PLACES} SELECT {_LINK_LINE} {_ARCHIVED_LINKS}"
    async for rows in batches_of(conn, size, query, bank_id, only):
        yield [row[0] for row in rows]


async def fact_places(conn: Conn, bank_id: str, only: list[str] | None, ids: list[object]) -> list[asyncpg.Record]:
    """The places of the facts given that are archived (of the documents asked for, or all)."""
    return await conn.fetch(f"WITH {_PLACES_OF_FACTS} SELECT * FROM places WHERE id = ANY($3::uuid[])",
                            bank_id, only, ids)


async def observation_batches(conn: asyncpg.Connection, bank_id: str, size: int) -> AsyncIterator[list[asyncpg.Record]]:
    """The observations, oldest first, `size` at a time from a cursor, with the columns an archive
    keeps (not the vector: ~1.5 kB a row, re-embedded on import). Needs the export's open transaction."""
    query = ("SELECT id, text, created_at, updated_at, tags, occurred_start, occurred_end, mentioned_at,"
             " observation_scopes, proof_count, source_memory_ids, evidence"
             " FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation' ORDER BY created_at, id")
    async for rows in batches_of(conn, size, query, bank_id):
        yield rows


async def observation_history(conn: Conn, bank_id: str, observation_ids: list[object]) -> list[asyncpg.Record]:
    """The past versions of the observations given, oldest first."""
    return await conn.fetch(
        "SELECT observation_id, text, source_memory_ids, evidence, reason, changed_at FROM observation_history"
        " WHERE bank_id = $1 AND observation_id = ANY($2::uuid[]) ORDER BY changed_at, id", bank_id, observation_ids,
    )


async def mental_models(conn: Conn, bank_id: str) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT * FROM mental_models WHERE bank_id = $1 ORDER BY created_at, id", bank_id)


async def mental_model_history(conn: Conn, bank_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT * FROM mental_model_history WHERE bank_id = $1 ORDER BY replaced_at, id", bank_id
    )


async def directives(conn: Conn, bank_id: str) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT * FROM directives WHERE bank_id = $1 ORDER BY created_at, id", bank_id)


async def attachments_of(conn: Conn, bank_id: str, document_ids: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        """
        SELECT a.*, c.chunk_index FROM attachments a LEFT JOIN chunks c ON c.id = a.chunk_id
        WHERE a.bank_id = $1 AND a.document_id = ANY($2::text[])
        ORDER BY a.document_id, a.block_index NULLS LAST, a.created_at, a.id
        """,
        bank_id, document_ids,
    )
