"""A converted file as a retain item, and its original kept as the document's file (an attachment
of role `original`, replaced when the same document is uploaded again)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidInput
from engram.retain.convert import FORMAT_MEDIA_TYPES, ConversionFailed, to_markdown
from engram.retain.prepare import PreparedItem, merge_tags, parse_item_timestamp
from engram.store import attachments
from engram.store.tx import Conn, transaction


def prepared_file(payload: dict[str, Any], data: bytes) -> tuple[PreparedItem, str]:
    try:
        markdown = to_markdown(payload["format"], data)
    except ConversionFailed as exc:
        raise ConversionFailed(f"{payload['filename']}: {exc}") from None
    try:
        said_at = parse_item_timestamp(payload.get("timestamp"), "timestamp", datetime.now(UTC))
    except InvalidInput as exc:
        raise ConversionFailed(f"{payload['filename']}: {exc.message}") from None
    metadata = {str(k): str(v) for k, v in (payload.get("metadata") or {}).items()}
    item = PreparedItem(
        index=0, text=markdown, said_at=said_at, document_id=payload["document_id"], context=payload.get("context"),
        metadata=metadata, tags=merge_tags(payload.get("tags")), observation_scopes=None, update_mode="replace",
    )
    return item, markdown


async def keep_original(conn: Conn, bank_id: str, payload: dict[str, Any], data: bytes) -> None:
    media_type = payload.get("media_type") or FORMAT_MEDIA_TYPES.get(payload["format"], "application/octet-stream")
    if media_type == "application/octet-stream":
        media_type = FORMAT_MEDIA_TYPES.get(payload["format"], media_type)
    async with transaction(conn) as tx:
        await tx.execute("DELETE FROM attachments WHERE bank_id = $1 AND document_id = $2 AND role = 'original'",
                         bank_id, payload["document_id"])
        await attachments.insert(tx, bank_id, [attachments.NewAttachment(
            id=uuid.uuid4(), document_id=payload["document_id"], kind="file", media_type=media_type, data=data,
            role="original", filename=payload["filename"],
        )])
