"""A retain run to the end despite concurrent writers of its documents: planned again when they changed."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from engram.errors import DocumentChanged
from engram.retain.document_turns import documents_in_turn

if TYPE_CHECKING:
    from engram.retain.pipeline import OnWritten, Progress, RetainOutcome
    from engram.retain.prepare import PreparedItem
    from engram.services import Services
    from engram.store.writer_locks import Claim

log = logging.getLogger(__name__)

# How many times a retain is planned before the conflict is raised. Between two plans it waits a time
# drawn at random up to 0.1 s, doubling each time, so writers that lost together spread out.
RETAIN_ATTEMPTS = 5


async def retain_replanned(
    services: Services, bank_id: str,
    items: list[PreparedItem] | Callable[[], Awaitable[list[PreparedItem]]], *,
    claim: Claim | None = None, progress: Progress | None = None, import_wait: float | None = None,
    on_written: OnWritten | None = None,
) -> RetainOutcome:
    """`retain_items` of the items, asked and run again when another writer (a retain in another server,
    a delete, an edit) changed one of its documents between the retain's plan and its write. `items` may
    be a function giving them as they are now, called for each attempt (a reprocess then reads the
    document's text again). Retains of one document in this server take turns (`document_turns`).

    Two retains appending to one conversation's document at once, or two worker slots running queued
    retains of one document, failed the second ("changed during this retain; retry it"): a sync one
    with a 409 its caller had to retry, a queued one with no caller left to do so. Each attempt runs
    the whole retain again, its LLM extraction included; after RETAIN_ATTEMPTS the conflict is raised.
    A queued retain writes nothing once its worker no longer holds the operation (`claim`; ClaimLost).
    `on_written`: see `retain_items`."""
    from engram.retain.pipeline import retain_items

    first = await items() if callable(items) else items
    async with documents_in_turn(bank_id, (item.document_id for item in first)):
        # read again once it is this retain's turn: a reprocess must not write back the text the retain
        # before it replaced
        now = await items() if callable(items) else first
        attempt = 1
        while True:
            try:
                return await retain_items(services, bank_id, now, progress=progress, import_wait=import_wait,
                                          claim=claim, on_written=on_written)
            except DocumentChanged as exc:
                if attempt == RETAIN_ATTEMPTS:
                    raise
                log.info("bank %r: %s (attempt %d of %d); planning it again", bank_id, exc, attempt,
                         RETAIN_ATTEMPTS)
                await asyncio.sleep(random.uniform(0, 0.05 * 2**attempt))
                attempt += 1
                now = await items() if callable(items) else items
