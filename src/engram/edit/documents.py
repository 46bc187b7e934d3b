"""Editing a document: new tags / observation scopes carried to its facts (their observations are
rebuilt in the new scope), and reprocessing (retain again from the stored text)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.consolidate.trigger import after_memory_change
from engram.errors import Conflict, InvalidInput, NotFound
from engram.retain.prepare import PreparedItem, merge_tags
from engram.store import document_events, edits
from engram.store import operations as ops
from engram.store.memories import clear_observations_of

if TYPE_CHECKING:
    from engram.services import Services

REPROCESS = "reprocess_document"


async def update_document(
    services: Services, bank_id: str, document_id: str, *, tags: list[str] | None, scopes: Any, set_scopes: bool
) -> dict[str, Any]:
    """Replace the tags and/or observation scopes of a document and of every fact it produced. The
    observations built from those facts belonged to the old scope: they are removed and the facts
    wait for consolidation again, so their observations are rebuilt where they now belong."""
    if tags is not None:
        for position, tag in enumerate(tags):
            if not tag.strip():
                raise InvalidInput(f"tags[{position}]", "must not be empty")
        tags = merge_tags(tags)
    async with services.changing_bank(bank_id, undone="changed") as conn:
        current = await edits.lock_document_row(conn, bank_id, document_id)
        if current is None:
            raise NotFound(f"document '{document_id}' not found in bank '{bank_id}'")
        same_tags = tags is None or list(current["tags"]) == tags
        if same_tags and (not set_scopes or current["observation_scopes"] == scopes):
            return {"success": True, "facts_updated": 0, "observations_removed": 0}  # nothing changes
        fact_ids = await edits.retag_document(
            conn, bank_id, document_id, tags=tags, scopes=scopes, set_scopes=set_scopes
        )
        removed = await edits.observations_citing(conn, bank_id, fact_ids)
        for fact_id in fact_ids if removed else []:
            await clear_observations_of(conn, bank_id, fact_id)
        await document_events.record(conn, bank_id, document_id, "retag", observations_removed=removed)
    await after_memory_change(services, bank_id)
    return {"success": True, "facts_updated": len(fact_ids), "observations_removed": len(removed)}


async def submit_reprocess(services: Services, bank_id: str, document_id: str) -> uuid.UUID:
    row = await services.pool.fetchrow(
        "SELECT original_text FROM documents WHERE bank_id = $1 AND id = $2", bank_id, document_id
    )
    if row is None:
        raise NotFound(f"document '{document_id}' not found in bank '{bank_id}'")
    if not row["original_text"]:
        raise Conflict(f"document '{document_id}' has no stored text to reprocess (store_document_text was off)")
    op_id, _ = await ops.enqueue(
        services.pool, bank_id, REPROCESS, {"document_id": document_id}, items_count=1, document_id=document_id
    )
    services.wake_worker()
    return op_id


def _said_at(retain_params: dict[str, Any] | None, fallback: datetime) -> datetime | None:
    stamp = (retain_params or {}).get("timestamp")
    if stamp == "unset":
        return None
    if not stamp:
        return fallback
    parsed = datetime.fromisoformat(stamp)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


async def reprocess_item(services: Services, bank_id: str, document_id: str, operation_id: uuid.UUID) -> PreparedItem:
    """The document as one retain item, as it was first retained, with every chunk to extract again."""
    row = await services.pool.fetchrow("SELECT * FROM documents WHERE bank_id = $1 AND id = $2", bank_id, document_id)
    if row is None:
        raise NotFound(f"document '{document_id}' was deleted before it could be reprocessed")
    if not row["original_text"]:
        raise Conflict(f"document '{document_id}' has no stored text to reprocess")
    params = row["retain_params"] or {}
    return PreparedItem(
        index=0, text=row["original_text"], said_at=_said_at(params, row["created_at"]), document_id=document_id,
        context=params.get("context"), metadata=dict(row["metadata"] or {}), tags=list(row["tags"]),
        observation_scopes=row["observation_scopes"], update_mode="replace", reextract=True,
        history_kind="reprocess", operation_id=operation_id,
    )
