"""A queued retain (an async retain, a reprocess, a file) run to the end despite concurrent writers."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from engram.errors import DocumentChanged

if TYPE_CHECKING:
    from engram.retain.pipeline import Progress, RetainOutcome
    from engram.retain.prepare import PreparedItem
    from engram.services import Services

log = logging.getLogger(__name__)

# How many times a queued retain is planned again when another writer changed one of its documents.
QUEUED_RETAIN_ATTEMPTS = 5


async def retain_queued(
    services: Services, bank_id: str, items_now: Callable[[], Awaitable[list[PreparedItem]]], *,
    progress: Progress | None = None,
) -> RetainOutcome:
    """`retain_items` of what `items_now()` gives, asked and run again when another retain or a delete
    changed one of its documents between the retain's plan and its write (a reprocess then reads the
    document's text as it is now). A retain sent and answered synchronously reports that as a 409 for
    its caller to retry; one the server acknowledged and queued has no caller left to do so, and two
    queued retains of one document, run by two worker slots at once, failed the second ("retry it")."""
    from engram.retain.pipeline import retain_items

    attempt = 1
    while True:
        try:
            return await retain_items(services, bank_id, await items_now(), progress=progress)
        except DocumentChanged as exc:
            if attempt == QUEUED_RETAIN_ATTEMPTS:
                raise
            log.info("bank %r: %s (attempt %d of %d); planning it again", bank_id, exc, attempt,
                     QUEUED_RETAIN_ATTEMPTS)
            await asyncio.sleep(random.uniform(0.05, 0.2) * attempt)
            attempt += 1
