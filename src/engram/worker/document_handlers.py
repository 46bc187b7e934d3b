"""Background work on documents: reprocessing one from its stored text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.worker.handlers import Progress, handler

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services


@handler("reprocess_document")
async def run_reprocess(services: Services, operation: asyncpg.Record, progress: Progress) -> dict[str, Any]:
    from engram.edit.documents import reprocess_item
    from engram.retain.pipeline import retain_items

    bank_id, document_id = operation["bank_id"], operation["payload"]["document_id"]
    item = await reprocess_item(services, bank_id, document_id, operation["id"])
    outcome = await retain_items(services, bank_id, [item], progress=progress)
    return {
        "document_id": document_id, "facts": len(outcome.unit_ids),
        "usage": {"input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens},
    }
