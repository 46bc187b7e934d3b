"""How many retains write to PostgreSQL at once in a server.

A retain's transaction keeps PostgreSQL busy: inserts, index updates, entity matching, link searches.
Thirty writers at once on two cores each got a backend of their own, and a recall of another bank,
sharing the cores with all of them, took ~7 times as long as alone (p50 306–413 ms against ~50).
With two slots a core, recall took 62–70 ms and the writers stored as many items as before; with one
a core the small retains stored half as many. The writers beyond the slots wait in the server, with no
connection and no lock (`writer_locks.writing_to_bank`).

Large retains have slots of their own, so that they never hold every slot: four 300,000-character
documents held all four (over a minute each, side by side), and another bank's one-item retains waited
41 s; with their own slots, 186 ms."""

from __future__ import annotations

import asyncio
import weakref

# A retain of this many characters or more is a large one: about a second of writing, or more.
LARGE_RETAIN_CHARS = 20_000

# Per event loop: the slots of small retains, then those of large ones.
_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


def retain_slots(configured: int, chars: int) -> asyncio.Semaphore:
    """The slots a retain of `chars` characters writes in. Small retains have `configured`
    (`ENGRAM_RETAIN_WRITE_SLOTS`), or when it is below 1 two per usable core; large ones half as many,
    one at least. The first call of an event loop sets their numbers."""
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        from engram.models.embedder import usable_cpus

        small = configured if configured >= 1 else 2 * usable_cpus()
        slots = _SLOTS[loop] = (asyncio.Semaphore(small), asyncio.Semaphore(max(1, small // 2)))
    return slots[1] if chars >= LARGE_RETAIN_CHARS else slots[0]
