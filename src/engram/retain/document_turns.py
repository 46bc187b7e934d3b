"""Retains of one document in one server take turns, from their plan to their commit.

A retain plans its document's chunks against the document as it finds it, extracts the new ones (an
LLM call), and only then writes, checking that the document did not change meanwhile
(`DocumentChanged`). Agents' turns appended to one conversation's document at once all planned
against the same version: every one but the first found it changed and was planned again, and those
again raced the turns arriving after them (six writers appending five turns each needed up to six
plans). Taking turns here, the next retain of a document plans once the previous one has committed.
Retains in other servers sharing the database still meet the check (`retain.replanned`)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

# Per event loop, per (bank, document): the lock whose holder retains the document, and how many
# retains hold or wait for it (the entry goes when none do).
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], list[Any]]] = (
    weakref.WeakKeyDictionary())


@asynccontextmanager
async def documents_in_turn(bank_id: str, document_ids: Iterable[str]) -> AsyncIterator[None]:
    """Wait for every one of the documents' turns, taken in sorted order so that two retains sharing
    documents never wait for each other in a cycle; they pass on when the block ends."""
    table = _TURNS.setdefault(asyncio.get_running_loop(), {})
    keys = sorted({(bank_id, document_id) for document_id in document_ids})
    entries = []
    for key in keys:
        entry = table.setdefault(key, [asyncio.Lock(), 0])
        entry[1] += 1
        entries.append(entry)
    taken: list[asyncio.Lock] = []
    try:
        for lock, _ in entries:
            await lock.acquire()
            taken.append(lock)
        yield
    finally:
        for lock in taken:
            lock.release()
        for key, entry in zip(keys, entries):
            entry[1] -= 1
            if entry[1] == 0:
                del table[key]
