"""Content blocks: the text of block content with its images and files kept aside, each placed at
its position in the text so it belongs to the chunk it appeared in. With no LLM that reads images
(none of Engram's providers sends them yet), the text around an image is retained and the image is
kept as an attachment of the document and its chunk, returned byte for byte."""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from dataclasses import dataclass
from typing import Any

from engram.errors import InvalidInput
from engram.store.attachments import NewAttachment

MEDIA_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")


@dataclass
class BlockAttachment:
    block_index: int
    kind: str  # image | file
    media_type: str
    data: bytes
    filename: str | None
    offset: int  # characters of the item's text before it


def _source(block: dict[str, Any], where: str) -> tuple[str, bytes]:
    source = block.get("source")
    if not isinstance(source, dict):
        raise InvalidInput(f"{where}.source", "an image or file block needs a source {type, media_type, data}")
    if source.get("type", "base64") != "base64":
        raise InvalidInput(f"{where}.source.type", "only base64 sources are accepted")
    media_type = source.get("media_type")
    if not isinstance(media_type, str) or not MEDIA_TYPE.match(media_type):
        raise InvalidInput(f"{where}.source.media_type", f"not a media type: {media_type!r}")
    data = source.get("data")
    if not isinstance(data, str):
        raise InvalidInput(f"{where}.source.data", "must be a base64 string")
    try:
        return media_type, base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}.source.data", "not valid base64") from None


def split_blocks(content: list[Any], where: str) -> tuple[str, list[BlockAttachment]]:
    """The text of the blocks (joined by newlines) and the attachments, in block order."""
    parts: list[str] = []
    attachments: list[BlockAttachment] = []
    for position, block in enumerate(content):
        at = f"{where}[{position}]"
        if not isinstance(block, dict) or "type" not in block:
            raise InvalidInput(at, "content blocks need a 'type'")
        kind = block["type"]
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise InvalidInput(f"{at}.text", "a text block needs its text")
            parts.append(text)
        elif kind in ("image", "file"):
            media_type, data = _source(block, at)
            offset = len("\n".join(parts))
            filename = block.get("filename") if kind == "file" else None
            attachments.append(BlockAttachment(position, kind, media_type, data, filename, offset))
        else:
            raise InvalidInput(f"{at}.type", f"must be text, image or file (got {kind!r})")
    return "\n".join(parts), attachments


def chunk_starts(text: str, chunks: list[str]) -> list[int]:
    """Where each chunk begins in the text it was cut from (chunks are pieces of it, in order)."""
    starts, cursor = [], 0
    for chunk in chunks:
        found = text.find(chunk, cursor)
        starts.append(found if found >= 0 else cursor)
        cursor = max(cursor, found + len(chunk)) if found >= 0 else cursor
    return starts


def owner_chunk(starts: list[int], chunk_ids: list[Any], at: int) -> Any:
    """The chunk an offset of the document's text falls in (the first one before any text)."""
    for index in reversed(range(len(chunk_ids))):
        if starts[index] <= at:
            return chunk_ids[index]
    return chunk_ids[0] if chunk_ids else None


def _placed(plan: Any) -> list[tuple[BlockAttachment, int, int | None]]:
    """Each new attachment of a document plan with its offset in the plan's text and the position of
    its chunk in `plan.chunks` (None when the plan has no chunk)."""
    text = "\n\n".join(item.text for item in plan.items)
    starts = chunk_starts(text, [c.text for c in plan.chunks])
    positions = list(range(len(plan.chunks)))
    out, item_offset = [], 0
    for item in plan.items:
        for a in item.attachments:
            at = item_offset + a.offset
            out.append((a, at, owner_chunk(starts, positions, at) if positions else None))
        item_offset += len(item.text) + 2
    return out


def images_by_chunk(plan: Any) -> dict[int, list[BlockAttachment]]:
    """The image blocks of a document plan, by the position of the chunk they sit in."""
    grouped: dict[int, list[BlockAttachment]] = {}
    for attachment, _, position in _placed(plan):
        if attachment.kind == "image" and position is not None:
            grouped.setdefault(position, []).append(attachment)
    return grouped


async def write_attachments(conn: Any, bank_id: str, plan: Any) -> None:
    """Store the attachments of a retain's document plan (retain.pipeline.DocumentPlan) with their
    chunks. A replace drops the document's earlier content attachments; a reprocess keeps them and
    finds their chunks again."""
    from engram.store import attachments as store

    items = plan.items
    chunk_ids = [c.reuse_id or c.chunk_id for c in plan.chunks]
    text = "\n\n".join(item.text for item in items)
    starts = chunk_starts(text, [c.text for c in plan.chunks])
    if items[0].reextract:
        kept = await store.offsets_of(conn, bank_id, plan.document_id)
        await store.set_chunks(conn, [r["id"] for r in kept],
                               [owner_chunk(starts, chunk_ids, r["text_offset"]) for r in kept])
        return
    if items[0].update_mode == "replace":
        await store.delete_content_of(conn, bank_id, plan.document_id)
    base = len(plan.original_text) - len(text)  # an append's text follows what the document had
    rows = [
        NewAttachment(
            id=uuid.uuid4(), document_id=plan.document_id, kind=a.kind, media_type=a.media_type, data=a.data,
            block_index=a.block_index, chunk_id=chunk_ids[position] if position is not None else None,
            filename=a.filename, text_offset=base + at,
        )
        for a, at, position in _placed(plan)
    ]
    await store.insert(conn, bank_id, rows)
