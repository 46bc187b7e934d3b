"""The background operations of bank transfer: export (to a stored archive), import (from an uploaded
one), clone (an export into a temporary file, imported back from it), and the deprecated document
variants. Each records its counts in the operation's result and shows its progress."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from typing import IO, TYPE_CHECKING, Any

from engram.store import files
from engram.transfer.archive import ArchiveWriter, read_archive
from engram.transfer.export import write_bank_archive
from engram.transfer.importer import ImportOptions, import_archive
from engram.worker.handlers import Progress, claim_of, handler

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services

DOWNLOAD_PATH = "/v1/default/files/download/"


def _export_options(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "include_data": payload.get("include_data", True),
        "include_bank_config": payload.get("include_bank_config", True),
        "document_ids": payload.get("document_ids"),
        "include_observations": payload.get("include_observations", True),
        "archive_type": payload.get("archive_type", "bank"),
    }


@handler("bank_export")
async def run_export(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    bank_id, payload = operation["bank_id"], operation["payload"]
    key = f"banks/{bank_id}/exports/{operation['id']}/transfer.zip"
    suffix = "documents" if payload.get("archive_type") == "documents" else "bank"
    filename = f"{bank_id}-{suffix}.zip"
    with tempfile.TemporaryFile() as spool:
        manifest = await write_export(services, bank_id, payload, spool, progress)
        spool.seek(0)
        await files.forget_old_exports(services.pool, bank_id)
        byte_size = await files.put_file(services.pool, key, bank_id, spool, media_type="application/zip",
                                         filename=filename)
    return {
        "storage_key": key, "download_url": DOWNLOAD_PATH + key, "byte_size": byte_size, "filename": filename,
        **{k: manifest[k] for k in ("document_count", "fact_count", "observation_count", "mental_model_count",
                                    "directive_count", "attachment_count")},
    }


async def write_export(
    services: Services, bank_id: str, payload: dict[str, Any], spool: IO[bytes], progress: Progress | None = None,
) -> dict[str, Any]:
    """The bank's archive into `spool`, from one snapshot; returns the manifest. `progress`: the
    "exporting" stage, once a batch of documents."""
    async def exported(done: int, total: int) -> None:
        if progress is not None:
            await progress("exporting", done, total)

    async with services.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        return await write_bank_archive(conn, bank_id, ArchiveWriter(spool), exported, **_export_options(payload))


def _options(payload: dict[str, Any], target: str) -> ImportOptions:
    return ImportOptions(
        target_bank_id=target, mode=payload.get("mode", "restore"),
        document_conflict=payload.get("document_conflict", "skip"),
        include_data=payload.get("include_data", True), include_bank_config=payload.get("include_bank_config", True),
    )


@handler("bank_import")
async def run_import(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    payload = operation["payload"]
    stored = await files.info(services.pool, payload["storage_key"])
    if stored is None:
        raise RuntimeError(f"the uploaded archive {payload['storage_key']} is gone; upload it again")
    with tempfile.TemporaryFile() as spool:  # the archive is read from a file, never whole in memory
        if await files.copy_to(services.pool, payload["storage_key"], spool) != stored["byte_size"]:
            raise RuntimeError(f"the uploaded archive {payload['storage_key']} changed while it was read; try again")
        archive = await asyncio.to_thread(read_archive, spool)
        target = payload.get("target_bank_id") or archive.source_bank_id
        result = await import_archive(services, archive, _options(payload, target), progress, claim_of(operation))
    await files.delete(services.pool, payload["storage_key"])  # imported: the upload is no longer needed
    return result


@handler("bank_clone")
async def run_clone(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    """An export into a temporary file, imported back from it: a big bank never in memory at once."""
    payload = operation["payload"]
    with tempfile.TemporaryFile() as spool:
        await write_export(services, operation["bank_id"], payload, spool, progress)
        spool.seek(0)
        archive = await asyncio.to_thread(read_archive, spool, check_documents=False)
        options = _options({**payload, "mode": "restore"}, payload["target_bank_id"])
        return await import_archive(services, archive, options, progress, claim_of(operation))


def upload_key(bank_id: str) -> str:
    return f"banks/{bank_id}/imports/{uuid.uuid4()}/transfer.zip"
