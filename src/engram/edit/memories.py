"""Editing one memory: its text, context, dates, type, entities or validity. A changed wording or date
is embedded again; the observations citing the memory are brought up to date by consolidating it
again (an invalidated memory stops supporting them)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engram.consolidate.trigger import after_memory_change
from engram.errors import InvalidInput, NotFound
from engram.models.tokens import count_tokens
from engram.retain.entities import Mention, store_entities
from engram.retain.facts import embedding_text
from engram.retain.prepare import merge_tags
from engram.store import document_events, edits
from engram.store.memories import clear_observations_of, get_unit
from engram.store.observations import forget_sources, mark_consolidated, reset_sources

if TYPE_CHECKING:
    from engram.services import Services

STATES = ("valid", "invalidated")
MAX_TEXT_CHARS = 100_000


def _date(value: str | None, field: str) -> datetime | None:
    if value is None or not value.strip():
        return None  # an empty string clears the date
    from engram.models.dates import parse_timestamp

    parsed = parse_timestamp(value)
    if parsed is None:
        raise InvalidInput(field, f"not a date-time: {value!r}")
    return parsed


def changes_from_request(fields: dict[str, Any], fact_type_now: str) -> dict[str, Any]:
    """The columns to set, validated; `fields` holds only what the request sent (null = unchanged)."""
    changes: dict[str, Any] = {}
    if fields.get("text") is not None:
        text = fields["text"].strip()
        if not text:
            raise InvalidInput("text", "must not be empty")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInput("text", f"longer than {MAX_TEXT_CHARS} characters")
        changes["text"] = text
        changes["token_count"] = count_tokens(text)
    if fields.get("context") is not None:
        changes["context"] = fields["context"]
    for name in ("occurred_start", "occurred_end", "mentioned_at"):
        if name in fields and fields[name] is not None:
            changes[name] = _date(fields[name], name)
    if fields.get("fact_type") is not None:
        if fields["fact_type"] not in ("world", "experience"):
            raise InvalidInput("fact_type", "must be world or experience")
        if fact_type_now == "observation":
            raise InvalidInput("fact_type", "an observation's type cannot be changed")
        changes["fact_type"] = fields["fact_type"]
    if fields.get("tags") is not None:  # Engram's addition to the contract's fields, as metadata
        for position, tag in enumerate(fields["tags"]):
            if not isinstance(tag, str) or not tag.strip():
                raise InvalidInput(f"tags[{position}]", "must be a non-empty string")
        changes["tags"] = merge_tags(fields["tags"])
    if fields.get("metadata") is not None:
        changes["metadata"] = {str(k): str(v) for k, v in fields["metadata"].items()}
    if fields.get("state") is not None:
        if fields["state"] not in STATES:
            raise InvalidInput("state", "must be valid or invalidated")
        changes["state"] = fields["state"]
        invalid = fields["state"] == "invalidated"
        changes["invalidation_reason"] = fields.get("reason") if invalid else None
        changes["invalidated_at"] = datetime.now().astimezone() if invalid else None
    return changes


def _vector(text: str, when: datetime | None, entities: list[str]) -> Any:
    from engram.models.embedder import embedder

    return embedder().embed([embedding_text(text, when, entities)])[0]


async def update_memory(
    services: Services, bank_id: str, memory_id: uuid.UUID, fields: dict[str, Any]
) -> dict[str, Any]:
    row = await get_unit(services.pool, bank_id, memory_id)
    if row is None:
        raise NotFound(f"memory '{memory_id}' not found in bank '{bank_id}'")
    changes = changes_from_request(fields, row["fact_type"])
    entities = fields.get("entities")
    if entities is not None:
        entities = list(dict.fromkeys(name.strip() for name in entities if name.strip()))
    merged = {**dict(row), **changes}
    names = entities if entities is not None else list(row["entity_names"])
    reembed = any(k in changes for k in ("text", "occurred_start", "mentioned_at")) or entities is not None
    vector = None
    if reembed:
        when = merged["occurred_start"] or merged["mentioned_at"]
        vector = await asyncio.to_thread(_vector, merged["text"], when, names)
    async with services.changing_bank(bank_id, undone="changed") as conn:
        if not await edits.update_unit(conn, memory_id, changes, vector):  # deleted meanwhile
            raise NotFound(f"memory '{memory_id}' not found in bank '{bank_id}'")
        if entities is not None:
            await edits.detach_entities(conn, memory_id)
            resolve = bool(fields.get("resolve_entities", True))
            await store_entities(conn, bank_id, [Mention(memory_id, entities, resolve)])
        kind = await _reconsolidate(conn, bank_id, row, changes)
        if row["document_id"] and row["fact_type"] != "observation":
            await document_events.record(conn, bank_id, row["document_id"], kind, fact_id=memory_id)
    await after_memory_change(services, bank_id)
    changed = sorted({*changes, *(["entities"] if entities is not None else [])})
    return {"success": True, "memory_id": str(memory_id), "changed": changed}


async def _reconsolidate(conn: Any, bank_id: str, row: Any, changes: dict[str, Any]) -> str:
    """What the edit means for consolidation, and the document event it is."""
    if row["fact_type"] == "observation":
        return "fact_edited"
    if changes.get("state") == "invalidated":
        await forget_sources(conn, bank_id, [row["id"]])  # no longer evidence for anything
        await mark_consolidated(conn, [row["id"]])
        return "fact_invalidated"
    if "tags" in changes and sorted(changes["tags"]) != sorted(row["tags"]):
        # Its observations belong to the old scope: they go, and it is consolidated in the new one.
        await clear_observations_of(conn, bank_id, row["id"])
    await reset_sources(conn, [row["id"]])  # consolidation sees it again, with its observations
    return "fact_restored" if changes.get("state") == "valid" and row["state"] != "valid" else "fact_edited"
