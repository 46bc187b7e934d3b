"""Moving banks: export to a transfer archive, import one (restore or merge), clone, download the
stored archive; and Hindsight's deprecated document-transfer routes, served as 1.1.0 serves them."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, File, Query, Request, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse

from engram.api.auth import bank_access
from engram.api.deps import require_bank, services
from engram.errors import Conflict, EngramError, InvalidInput, NotFound
from engram.services import Services
from engram.store import files
from engram.store import operations as ops
from engram.store.banks import get_bank
from engram.transfer.archive import Archive, read_archive
from engram.transfer.handlers import upload_key
from engram.transfer.importer import CONFLICTS, MODES

router = APIRouter(prefix="/v1/default", tags=["Bank Transfer"])


class Forbidden(EngramError):
    status = 403


def _may_create(request: Request, target: str) -> None:
    """A bank-limited API key may only create (import into, clone into) a bank it may use."""
    access = bank_access(request)
    if access is not None and not access.allows(target):
        raise Forbidden(f"this API key may not use bank '{target}'")


async def _submit(svc: Services, bank_id: str, operation_type: str, payload: dict[str, Any]) -> JSONResponse:
    op_id, _ = await ops.enqueue(svc.pool, bank_id, operation_type, payload)
    svc.wake_worker()
    return JSONResponse(status_code=202, content={"operation_id": str(op_id), "status": "pending"})


@router.post("/banks/{bank_id}/transfer/export")
async def export_bank_transfer(
    bank_id: str, include_data: bool = True, include_bank_config: bool = True, include_history: bool = False,
    document_id: list[str] | None = Query(None), svc: Services = Depends(services),
) -> JSONResponse:
    await require_bank(svc, bank_id)
    payload = {"include_data": include_data, "include_bank_config": include_bank_config,
               "include_history": include_history, "document_ids": document_id, "archive_type": "bank"}
    return await _submit(svc, bank_id, "bank_export", payload)


async def _checked(file: UploadFile) -> Archive:
    """The uploaded archive, read and checked on a thread (a bad one is a 400 at once; a big one's
    documents take seconds to parse). The upload stays on disk past its first megabyte."""
    await file.seek(0)
    return await asyncio.to_thread(read_archive, file.file)


async def _keep(svc: Services, bank_id: str, file: UploadFile) -> str:
    """The upload stored for the worker, a part at a time; returns its key."""
    key = upload_key(bank_id)
    await file.seek(0)
    await files.put_file(svc.pool, key, bank_id, file.file, media_type="application/zip", filename=file.filename)
    return key


@router.post("/banks/{bank_id}/transfer/import")
async def import_bank_transfer(
    bank_id: str, request: Request, file: UploadFile = File(...), mode: str = "restore",
    target_bank_id: str | None = None, document_conflict: str = "skip", include_data: bool | None = None,
    include_bank_config: bool | None = None,
    include_history: bool | None = None, svc: Services = Depends(services),
) -> JSONResponse:
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of {', '.join(MODES)}")
    if document_conflict not in CONFLICTS:
        raise InvalidInput("document_conflict", f"must be one of {', '.join(CONFLICTS)}")
    archive = await _checked(file)
    target = target_bank_id or archive.source_bank_id or bank_id
    _may_create(request, target)
    if mode == "restore" and await get_bank(svc.pool, target) is not None:
        raise Conflict(f"bank '{target}' already exists: a restore creates a new bank (use mode=merge to add to it)")
    key = await _keep(svc, bank_id, file)
    payload = {"storage_key": key, "target_bank_id": target, "mode": mode, "document_conflict": document_conflict,
               "include_data": include_data is not False, "include_bank_config": include_bank_config is not False}
    return await _submit(svc, bank_id, "bank_import", payload)


@router.post("/banks/{bank_id}/clone")
async def clone_bank(
    bank_id: str, request: Request, target_bank_id: str, include_data: bool = True, include_bank_config: bool = True,
    include_history: bool = False, svc: Services = Depends(services),
) -> JSONResponse:
    await require_bank(svc, bank_id)
    if not target_bank_id.strip():
        raise InvalidInput("target_bank_id", "must not be empty")
    _may_create(request, target_bank_id)
    if await get_bank(svc.pool, target_bank_id) is not None:
        raise Conflict(f"bank '{target_bank_id}' already exists: a clone creates a new bank")
    payload = {"target_bank_id": target_bank_id, "include_data": include_data,
               "include_bank_config": include_bank_config}
    return await _submit(svc, bank_id, "bank_clone", payload)


@router.get("/files/download/{key:path}", tags=["Document Transfer"])
async def download_file(key: str, request: Request, svc: Services = Depends(services)) -> StreamingResponse:
    row = await files.info(svc.pool, key)
    access = bank_access(request)  # a bank-limited API key sees other banks' files as missing
    if row is None or (access is not None and not access.allows(row["bank_id"])):
        raise NotFound(f"file '{key}' not found")
    headers = {"Content-Disposition": f'attachment; filename="{row["filename"] or "download"}"',
               "Content-Length": str(row["byte_size"])}
    # Streamed a stored part at a time: an archive can pass a gigabyte. Should the file be deleted
    # meanwhile, the body ends short of its Content-Length and the client sees the download fail.
    return StreamingResponse(files.parts(svc.pool, key), media_type=row["media_type"], headers=headers)


# --- deprecated in Hindsight 1.1.0, served the same way --------------------------------------------


@router.get("/banks/{bank_id}/document-transfer", tags=["Document Transfer"], deprecated=True)
async def export_documents_sync_removed(bank_id: str) -> JSONResponse:
    detail = (f"Synchronous document export was removed: submit POST /v1/default/banks/{bank_id}/document-transfer/"
              "export, poll the operation, then download the archive from the download_url in its result_metadata.")
    return JSONResponse(status_code=410, content={"detail": detail, "error": "Gone"})


@router.post("/banks/{bank_id}/document-transfer/export", tags=["Document Transfer"], deprecated=True)
async def export_documents(
    bank_id: str, document_id: list[str] | None = Query(None), include_observations: bool = False,
    include_knowledge_base: bool = False, svc: Services = Depends(services),
) -> JSONResponse:
    await require_bank(svc, bank_id)
    if include_observations and document_id:
        raise InvalidInput("include_observations", "observations can only be exported with the whole bank")
    payload = {"include_data": True, "include_bank_config": include_knowledge_base, "document_ids": document_id,
               "include_observations": include_observations, "archive_type": "documents"}
    return await _submit(svc, bank_id, "bank_export", payload)


@router.post("/banks/{bank_id}/document-transfer", tags=["Document Transfer"], deprecated=True)
async def import_documents(
    bank_id: str, file: UploadFile = File(...), on_conflict: str = "skip", svc: Services = Depends(services),
) -> JSONResponse:
    await require_bank(svc, bank_id)
    if on_conflict not in CONFLICTS:
        raise InvalidInput("on_conflict", f"must be one of {', '.join(CONFLICTS)}")
    await _checked(file)
    key = await _keep(svc, bank_id, file)
    payload = {"storage_key": key, "target_bank_id": bank_id, "mode": "merge", "document_conflict": on_conflict,
               "include_data": True, "include_bank_config": False}
    return await _submit(svc, bank_id, "bank_import", payload)
