"""Writing new documents in a handful of statements.

A bulk retain of 100 items is 100 documents. Written one by one, each took ten statements (its lock,
the check that nobody wrote it meanwhile, its row, its history event, its chunks, the clean-up of what
an earlier version left...), a thousand round trips per batch, more than the facts themselves cost.
When every document of a batch is new (nothing stored under its id at planning time, no attachments,
no reprocessing), the same rows are written here in one statement, a part of it per table (for a
single new document too: one statement, or three with the documents a caller named locked and
checked, instead of eleven). What the one-by-one path would have done
differently for such documents is checked first, under the same locks: a document that gained chunks
since planning is a conflict either way; one that holds other leftovers (facts whose chunk was
deleted, attachments) goes the one-by-one way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engram.errors import DocumentChanged
from engram.store import facts_write as fw
from engram.store.sql import SqlParams
from engram.store.writer_locks import lock_documents

if TYPE_CHECKING:
    from engram.retain.pipeline import DocumentPlan


def all_fresh(plans: list[DocumentPlan]) -> bool:
    """Whether this path applies: every document new when planned."""
    return bool(plans) and all(
        not plan.expected_existing
        and not plan.items[0].reextract
        and not any(chunk.reuse_id for chunk in plan.chunks)
        and not any(item.attachments for item in plan.items)
        for plan in plans
    )


async def write_fresh_documents(
    conn: Any, bank_id: str, plans: list[DocumentPlan], store_text: bool, retain_params: dict[str, dict[str, Any]],
    facts_added: Mapping[str, int] | None = None,
) -> bool:
    """The documents' rows and chunks, and their history events when their facts are counted already
    (`facts_added`: every fact extracted, as when an LLM extracts them) — else the caller writes those
    once they are (`record_fresh_events`): all in one statement, each table's rows a part of it (they
    were three round trips in a row of every retain). False (nothing written) when a document holds
    leftovers and the caller should write them one by one. Raises DocumentChanged when one gained
    chunks meanwhile."""
    # A document whose id the server made for this retain cannot be written by anyone else: it is
    # neither locked nor checked.
    named = [plan.document_id for plan in plans if not plan.items[0].document_id_made_here]
    if named and not await _locked_unwritten(conn, bank_id, named):
        return False
    params = SqlParams()
    bank = params.add(bank_id)
    documents = params.add(_document_rows(plans, store_text, retain_params))
    parts = [f"documents_written AS ({fw.upsert_documents_sql(bank, documents)})"]
    chunks = [(c.chunk_id, plan.document_id, c.index, c.text, c.content_hash) for plan in plans for c in plan.chunks]
    if chunks:  # their documents' key is checked once the whole statement's rows are in
        columns = [params.add(column) for column in fw.chunk_columns(chunks)]
        parts.append(f"chunks_written AS ({fw.insert_chunks_sql(bank, columns)})")
    if facts_added is not None:
        parts.append(f"events_written AS ({_events_sql(params, bank, plans, facts_added)})")
    await conn.execute(f"WITH {', '.join(parts)} SELECT 1", *params.values)
    return True


async def _locked_unwritten(conn: Any, bank_id: str, ids: list[str]) -> bool:
    """Lock the documents `ids`; False when one holds leftovers (facts, attachments). Raises
    DocumentChanged when one gained chunks since it was planned."""
    await lock_documents(conn, bank_id, ids)
    state = await conn.fetch(
        """
        SELECT u.d AS document_id,
               EXISTS (SELECT 1 FROM chunks c WHERE c.bank_id = $1 AND c.document_id = u.d) AS has_chunks,
               EXISTS (SELECT 1 FROM memory_units m WHERE m.bank_id = $1 AND m.document_id = u.d)
               OR EXISTS (SELECT 1 FROM attachments a WHERE a.bank_id = $1 AND a.document_id = u.d) AS has_leftovers
        FROM unnest($2::text[]) AS u(d)
        """,
        bank_id, ids,
    )
    for row in state:
        if row["has_chunks"]:
            raise DocumentChanged(row["document_id"])
    return not any(row["has_leftovers"] for row in state)


async def record_fresh_events(
    conn: Any, bank_id: str, plans: list[DocumentPlan], facts_added: Mapping[str, int],
) -> None:
    """The history event of each document `write_fresh_documents` wrote, with the facts it added."""
    params = SqlParams()
    await conn.execute(_events_sql(params, params.add(bank_id), plans, facts_added), *params.values)


def _events_sql(params: SqlParams, bank: str, plans: list[DocumentPlan], facts_added: Mapping[str, int]) -> str:
    plans = sorted(plans, key=lambda p: p.document_id)
    return f"""
        INSERT INTO document_events (bank_id, document_id, kind, operation_id, facts_added)
        SELECT {bank}, u.d, u.k, u.o, u.n
        FROM unnest({params.add([plan.document_id for plan in plans])}::text[],
                    {params.add([plan.items[0].history_kind for plan in plans])}::text[],
                    {params.add([plan.items[0].operation_id for plan in plans])}::uuid[],
                    {params.add([facts_added.get(plan.document_id, 0) for plan in plans])}::int[]) AS u(d, k, o, n)
    """


def _document_rows(plans: list[DocumentPlan], store_text: bool,
                   retain_params: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each document's row for `facts_write.upsert_documents`, as the one-by-one path writes it."""
    from engram.retain.pipeline import content_hash

    return [
        {
            "id": plan.document_id,
            "original_text": plan.original_text if store_text else None,
            "content_hash": content_hash(plan.original_text),
            "tags": plan.items[0].tags,
            "metadata": plan.items[0].metadata or None,
            "retain_params": retain_params[plan.document_id],
            "observation_scopes": plan.items[0].observation_scopes,
        }
        for plan in plans
    ]
