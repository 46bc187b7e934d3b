"""New memory units get version-7 UUIDs: creation time in the leading bits, so B-trees keyed by unit id
take new rows at their right-hand end (see engram.store.unit_ids)."""

from __future__ import annotations

import time
import uuid

from engram.store.unit_ids import created_millis, new_unit_id


def test_ids_are_rfc_9562_version_7_with_the_creation_time() -> None:
    before = time.time_ns() // 1_000_000
    unit_id = new_unit_id()
    after = time.time_ns() // 1_000_000
    assert unit_id.version == 7 and unit_id.variant == uuid.RFC_4122
    assert before <= created_millis(unit_id) <= after
    assert uuid.UUID(str(unit_id)) == unit_id


def test_later_ids_sort_after_earlier_ones_and_none_repeat() -> None:
    earlier = [new_unit_id() for _ in range(2_000)]
    time.sleep(0.002)
    later = [new_unit_id() for _ in range(2_000)]
    assert max(earlier) < min(later), "ids made a millisecond apart are ordered by time"
    assert len(set(earlier + later)) == 4_000
    assert len({u.int & ((1 << 62) - 1) for u in earlier}) == 2_000, "the low bits are random"
