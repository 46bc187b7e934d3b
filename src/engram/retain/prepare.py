"""Turning request items into validated, normalised inputs: content text, timestamps, document ids,
tags. Every problem is an InvalidInput naming the item's field."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidInput, PayloadTooLarge
from engram.retain.attachments import BlockAttachment, split_blocks
from engram.store.instants import OutOfCalendar, in_utc
from engram.types import MemoryItem

MAX_ITEMS = 1000
MAX_CONTENT_CHARS = 2_000_000
# Per item: each bounds work that grows with the list (entities pair up into co-occurrences,
# explicit observation scopes each consolidate on their own).
MAX_ENTITIES_PER_ITEM = 50
MAX_TAGS_PER_ITEM = 100
MAX_SCOPES_PER_ITEM = 32


@dataclass
class PreparedItem:
    index: int
    text: str
    said_at: datetime | None  # None when the caller marked the content timeless ("unset")
    document_id: str
    context: str | None
    metadata: dict[str, str]
    tags: list[str]
    observation_scopes: Any
    entities: list[str] = field(default_factory=list)
    entity_types: dict[str, str] = field(default_factory=dict)  # the caller's `type`, when a known kind
    update_mode: str = "replace"
    resolve_entities: bool = True
    reextract: bool = False  # reprocess: extract every chunk again, even unchanged ones
    history_kind: str = "retain"  # the document event this retain records (migration 010)
    operation_id: uuid.UUID | None = None
    attachments: list[BlockAttachment] = field(default_factory=list)  # images and files of block content
    # The server made `document_id` for this retain (the caller named none): nothing can be stored
    # under it yet, so nothing is looked up or locked for it (`retain.fresh_documents`).
    document_id_made_here: bool = False


def _caller_types(item: MemoryItem) -> dict[str, str]:
    from engram.retain.entity_kinds import normalise_type

    typed = {e.text.strip(): normalise_type(e.type) for e in item.entities or [] if e.text.strip()}
    return {name: kind for name, kind in typed.items() if kind}


def content_text(content: str | list[dict[str, Any]], field_name: str) -> str:
    """Plain text of the content; of block content, the text blocks in order (images and files are
    kept as attachments: see retain.attachments)."""
    if isinstance(content, str):
        return content
    return split_blocks(content, field_name)[0]


def parse_item_timestamp(value: datetime | str | None, field_name: str, now: datetime) -> datetime | None:
    if value is None:
        return now
    if isinstance(value, datetime):
        parsed: datetime | None = value
    elif value == "unset":
        return None
    else:
        from engram.models.dates import parse_timestamp

        parsed = parse_timestamp(value)
    if parsed is None:
        raise InvalidInput(field_name, f"not a date-time: {value!r} (use ISO 8601 or \"unset\")")
    try:
        return in_utc(parsed)
    except OutOfCalendar as exc:
        raise InvalidInput(field_name, str(exc)) from None


def merge_tags(*groups: list[str] | None) -> list[str]:
    merged: dict[str, None] = {}
    for group in groups:
        for tag in group or []:
            if tag.strip():
                merged[tag.strip()] = None
    return list(merged)


def _at_most(values: list[Any] | None, limit: int, field_name: str, what: str) -> None:
    if values is not None and len(values) > limit:
        raise PayloadTooLarge(field_name, f"at most {limit} {what} (got {len(values)})")


def _check_list_sizes(item: MemoryItem, where: str, document_tags: list[str] | None) -> None:
    _at_most(item.entities, MAX_ENTITIES_PER_ITEM, f"{where}.entities", "entities per item")
    _at_most(item.tags, MAX_TAGS_PER_ITEM, f"{where}.tags", "tags per item")
    _at_most(document_tags, MAX_TAGS_PER_ITEM, "document_tags", "document tags")
    if isinstance(item.observation_scopes, list):
        _at_most(item.observation_scopes, MAX_SCOPES_PER_ITEM, f"{where}.observation_scopes", "scopes per item")


def prepare_items(items: list[MemoryItem], document_tags: list[str] | None) -> list[PreparedItem]:
    if not items:
        raise InvalidInput("items", "at least one item is required")
    if len(items) > MAX_ITEMS:
        raise PayloadTooLarge("items", f"at most {MAX_ITEMS} items per request (got {len(items)})")
    now = datetime.now(UTC)
    prepared = []
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if isinstance(item.content, str):
            raw, attachments = item.content, []
        else:
            raw, attachments = split_blocks(item.content, f"{where}.content")
        text = raw.strip()
        if not text and not attachments:
            raise InvalidInput(f"{where}.content", "must not be empty")
        lead = len(raw) - len(raw.lstrip())
        for attachment in attachments:  # offsets into the stripped text
            attachment.offset = max(0, min(len(text), attachment.offset - lead))
        if len(text) > MAX_CONTENT_CHARS:
            raise PayloadTooLarge(f"{where}.content", f"longer than {MAX_CONTENT_CHARS} characters (got {len(text)})")
        _check_list_sizes(item, where, document_tags)
        prepared.append(
            PreparedItem(
                index=index,
                text=text,
                said_at=parse_item_timestamp(item.timestamp, f"{where}.timestamp", now),
                document_id=item.document_id or str(uuid.uuid4()),
                document_id_made_here=not item.document_id,
                context=item.context,
                metadata=dict(item.metadata or {}),
                tags=merge_tags(item.tags, document_tags),
                observation_scopes=item.observation_scopes,
                entities=[e.text.strip() for e in item.entities or [] if e.text.strip()],
                entity_types=_caller_types(item),
                update_mode=item.update_mode or "replace",
                resolve_entities=item.resolve_entities,
                attachments=attachments,
            )
        )
    return prepared
