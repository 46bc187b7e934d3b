"""Ids of new memory units (facts and observations) that start with their creation time.

A unit id is a UUID in the layout of RFC 9562's version 7: 48 bits of Unix milliseconds, then the
version and variant, then 74 random bits. Every B-tree keyed by a unit id (memory_units' primary key,
memory_links' (from_unit, to_unit, link_type), unit_entities, consolidation_status, ...) then takes a
new unit's rows at its right-hand end, on the few pages the previous batch just wrote, instead of on a
random page each: at 100,000 facts, where memory_links' primary key is ~600 MB, inserting 500 facts
with their semantic and temporal links cost 3.05 instead of 3.54 ms of PostgreSQL time a fact. Ids
stay unique by their random bits; nothing orders results by id (equal scores are ordered by content,
`recall.pipeline.content_order`), so the time in them changes no answer.
"""

from __future__ import annotations

import os
import time
import uuid

_MILLIS_BITS, _RAND_A_BITS, _RAND_B_BITS = 48, 12, 62
_VERSION, _VARIANT = 0x7, 0b10


def new_unit_id() -> uuid.UUID:
    """A fresh version-7 UUID for a memory unit: its creation time in milliseconds, then randomness."""
    millis = time.time_ns() // 1_000_000 & ((1 << _MILLIS_BITS) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> _RAND_B_BITS & ((1 << _RAND_A_BITS) - 1)
    rand_b = rand & ((1 << _RAND_B_BITS) - 1)
    value = millis << 80 | _VERSION << 76 | rand_a << 64 | _VARIANT << 62 | rand_b
    return uuid.UUID(int=value)


def created_millis(unit_id: uuid.UUID) -> int:
    """The Unix milliseconds a version-7 unit id was made at."""
    return unit_id.int >> 80
