"""Files to memories: POST …/files/retain takes up to 10 files (100 MB in all) as multipart `files`
with a `request` JSON string (per-file document_id, context, tags, metadata, timestamp), keeps
each file in PostgreSQL and queues one operation per file, which converts it to markdown, retains
it and keeps the original as the document's file."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import UploadFile

from engram.api.deps import services
from engram.errors import EngramError, InvalidInput, PayloadTooLarge
from engram.retain.convert import file_format
from engram.services import Services
from engram.store import files as stored
from engram.store import operations as ops
from engram.store.tx import transaction
from engram.store.writer_locks import ensure_bank_to_queue_into

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Files"])
MAX_FILES = 10
MAX_TOTAL_BYTES = 100 * 1024 * 1024
PER_FILE_FIELDS = ("document_id", "context", "metadata", "tags", "timestamp", "parser", "strategy")


class UnsupportedFileType(EngramError):
    status = 415


def _request_body(raw: Any, count: int) -> list[dict[str, Any]]:
    if not isinstance(raw, str):
        raise InvalidInput("request", "the form needs a 'request' field holding a JSON string")
    try:
        body = json.loads(raw or "{}")
    except ValueError as exc:
        raise InvalidInput("request", f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput("request", "must be a JSON object")
    misplaced = sorted(k for k in PER_FILE_FIELDS if k not in ("parser", "strategy") and body.get(k) is not None)
    if misplaced:
        raise InvalidInput("request", f"per-file fields ({', '.join(misplaced)}) belong in 'files_metadata' entries")
    metadata = body.get("files_metadata") or [{} for _ in range(count)]
    if not isinstance(metadata, list) or len(metadata) != count:
        raise InvalidInput("request.files_metadata", f"must have one entry per file ({count})")
    for index, entry in enumerate(metadata):
        where = f"request.files_metadata[{index}]"
        if not isinstance(entry, dict):
            raise InvalidInput(where, "must be an object")
        if entry.get("tags") is not None and not (
                isinstance(entry["tags"], list) and all(isinstance(t, str) for t in entry["tags"])):
            raise InvalidInput(f"{where}.tags", "must be a list of strings")
        if entry.get("metadata") is not None and not isinstance(entry["metadata"], dict):
            raise InvalidInput(f"{where}.metadata", "must be an object")
        for key in ("document_id", "context", "timestamp"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise InvalidInput(f"{where}.{key}", "must be a string")
    return metadata


@router.post("/files/retain")
async def file_retain(bank_id: str, request: Request, svc: Services = Depends(services)) -> dict[str, Any]:
    form = await request.form(max_files=MAX_FILES + 1)
    uploads = [f for f in [*form.getlist("files"), *form.getlist("files[]")] if isinstance(f, UploadFile)]
    if not uploads:
        raise InvalidInput("files", "at least one file is required")
    if len(uploads) > MAX_FILES:
        raise InvalidInput("files", f"at most {MAX_FILES} files per request (got {len(uploads)})")
    metadata = _request_body(form.get("request"), len(uploads))
    files, total = [], 0
    for index, upload in enumerate(uploads):
        name = upload.filename or f"file-{index}"
        fmt = file_format(name, upload.content_type)
        if fmt is None:
            raise UnsupportedFileType(f"files[{index}] '{name}': unsupported file type "
                                      f"({upload.content_type or 'no media type'}); accepted: PDF, DOCX, PPTX, "
                                      "XLSX, HTML, Markdown, plain text, CSV, JSON")
        data = await upload.read()
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise PayloadTooLarge("files", f"more than {MAX_TOTAL_BYTES} bytes in all")
        if not data:
            raise InvalidInput(f"files[{index}]", f"'{name}' is empty")
        files.append((name, fmt, upload.content_type, data))
    operation_ids = []
    async with transaction(svc.pool) as conn:
        await ensure_bank_to_queue_into(conn, bank_id)  # not waiting for a restore making the bank
        for (name, fmt, media_type, data), meta in zip(files, metadata):
            key = f"banks/{bank_id}/uploads/{uuid.uuid4()}/{name}"
            await stored.put(conn, key, bank_id, data, media_type=media_type or "application/octet-stream",
                             filename=name)
            document_id = meta.get("document_id") or str(uuid.uuid4())
            payload = {"storage_key": key, "filename": name, "format": fmt, "media_type": media_type,
                       "document_id": document_id, **{k: meta.get(k) for k in ("context", "tags", "metadata",
                                                                               "timestamp")}}
            op_id, _ = await ops.enqueue(conn, bank_id, "file_retain", payload, items_count=1, document_id=document_id)
            operation_ids.append(str(op_id))
    svc.wake_worker()
    return {"operation_ids": operation_ids}
