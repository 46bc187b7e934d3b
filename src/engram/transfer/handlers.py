"""The background operations of bank transfer: export (to a stored archive), import (from an uploaded
one), clone (export and import back to back, no archive in between), and the deprecated document
variants. Each records its counts in the operation's result."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from engram.store import files
from engram.transfer.archive import read_archive, write_archive
from engram.transfer.export import export_bank
from engram.transfer.importer import ImportOptions, import_archive
from engram.worker.handlers import Progress, handler

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services

DOWNLOAD_PATH = "/v1/default/files/download/"


async def _export(services: Services, bank_id: str, payload: dict[str, Any]) -> Any:
    async with services.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        return await export_bank(
            conn, bank_id, include_data=payload.get("include_data", True),
            include_bank_config=payload.get("include_bank_config", True), document_ids=payload.get("document_ids"),
            include_observations=payload.get("include_observations", True),
            archive_type=payload.get("archive_type", "bank"),
        )


@handler("bank_export")
async def run_export(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    bank_id, payload = operation["bank_id"], operation["payload"]
    await progress("exporting", 0, 1)
    archive = await _export(services, bank_id, payload)
    data = write_archive(archive)
    key = f"banks/{bank_id}/exports/{operation['id']}/transfer.zip"
    suffix = "documents" if payload.get("archive_type") == "documents" else "bank"
    filename = f"{bank_id}-{suffix}.zip"
    await files.forget_old_exports(services.pool, bank_id)
    await files.put(services.pool, key, bank_id, data, media_type="application/zip", filename=filename)
    manifest = archive.manifest
    return {
        "storage_key": key, "download_url": DOWNLOAD_PATH + key, "byte_size": len(data), "filename": filename,
        **{k: manifest[k] for k in ("document_count", "fact_count", "observation_count", "mental_model_count",
                                    "directive_count", "attachment_count")},
    }


def _options(payload: dict[str, Any], target: str) -> ImportOptions:
    return ImportOptions(
        target_bank_id=target, mode=payload.get("mode", "restore"),
        document_conflict=payload.get("document_conflict", "skip"),
        include_data=payload.get("include_data", True), include_bank_config=payload.get("include_bank_config", True),
    )


@handler("bank_import")
async def run_import(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    payload = operation["payload"]
    stored = await files.get(services.pool, payload["storage_key"])
    if stored is None:
        raise RuntimeError(f"the uploaded archive {payload['storage_key']} is gone; upload it again")
    archive = read_archive(bytes(stored["data"]))
    target = payload.get("target_bank_id") or archive.source_bank_id
    result = await import_archive(services, archive, _options(payload, target), progress)
    await files.delete(services.pool, payload["storage_key"])  # imported: the upload is no longer needed
    return result


@handler("bank_clone")
async def run_clone(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    payload = operation["payload"]
    await progress("exporting", 0, 1)
    archive = await _export(services, operation["bank_id"], payload)
    options = _options({**payload, "mode": "restore"}, payload["target_bank_id"])
    return await import_archive(services, archive, options, progress)


def upload_key(bank_id: str) -> str:
    return f"banks/{bank_id}/imports/{uuid.uuid4()}/transfer.zip"
