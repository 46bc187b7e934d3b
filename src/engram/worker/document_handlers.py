"""Background work on documents: reprocessing one from its stored text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.worker.handlers import Progress, claim_of, handler

if TYPE_CHECKING:
    import asyncpg

    from engram.retain.prepare import PreparedItem
    from engram.services import Services


@handler("reprocess_document")
async def run_reprocess(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.edit.documents import reprocess_item
    from engram.retain.replanned import retain_replanned

    bank_id, document_id = operation["bank_id"], operation["payload"]["document_id"]

    async def items_now() -> list[PreparedItem]:  # the stored text as it is at each attempt
        return [await reprocess_item(services, bank_id, document_id, operation["id"])]

    outcome = await retain_replanned(services, bank_id, items_now, claim=claim_of(operation), progress=progress)
    return {
        "document_id": document_id, "facts": len(outcome.unit_ids),
        "usage": {"input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens},
    }


@handler("file_retain")
async def run_file_retain(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    """Convert the uploaded file to markdown, retain it as its document, keep the original with it.
    A file that cannot be read fails the operation with the reason."""
    import asyncio

    from engram.retain.files import keep_original, prepared_file
    from engram.retain.replanned import retain_replanned
    from engram.store import files

    payload, bank_id = operation["payload"], operation["bank_id"]
    upload = await files.read(services.pool, payload["storage_key"])
    if upload is None:
        raise RuntimeError(f"the uploaded file {payload['filename']} is gone; upload it again")
    await progress("converting", 0, 1)
    item, markdown = await asyncio.to_thread(prepared_file, payload, upload)

    outcome = await retain_replanned(services, bank_id, [item], claim=claim_of(operation), progress=progress)
    await keep_original(services.pool, bank_id, payload, upload)
    await files.delete(services.pool, payload["storage_key"])
    return {"document_id": item.document_id, "filename": payload["filename"], "format": payload["format"],
            "markdown_chars": len(markdown), "facts": len(outcome.unit_ids)}
