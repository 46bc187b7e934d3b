"""How many retains write to PostgreSQL at once in a server.

A retain's transaction keeps PostgreSQL busy: inserts, index updates, entity matching, link searches.
Thirty writers at once on two cores each got a backend of their own, and a recall of another bank,
sharing the cores with all of them, took ~7 times as long as alone (p50 306–413 ms against ~50).
With two slots a core, recall took 62–70 ms and the writers stored as many items as before; with one
a core the small retains stored half as many. The writers beyond the slots wait in the server, with no
connection and no lock (`writer_locks.writing_to_bank`)."""

from __future__ import annotations

import asyncio
import weakref

_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def retain_slots(configured: int = 0) -> asyncio.Semaphore:
    """This event loop's slots for retains' transactions: `configured` (`ENGRAM_RETAIN_WRITE_SLOTS`), or
    when it is below 1 two per usable core. The first call of a loop sets their number."""
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        from engram.models.embedder import usable_cpus

        slots = _SLOTS[loop] = asyncio.Semaphore(configured if configured >= 1 else 2 * usable_cpus())
    return slots
