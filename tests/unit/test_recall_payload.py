"""A recall result shows each stored date exactly as `datetime.isoformat` writes it, though the ISO
forms are cached (engram.recall.rows): every microsecond kept, and a value read back naive (a stored
±infinity of older versions) never printed as an aware one of the same wall time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from engram.recall.rows import result_payload


def row(mentioned_at: datetime, occurred_start: datetime | None = None) -> dict[str, object]:
    return {"id": uuid.uuid4(), "text": "Ada met Ben.", "fact_type": "world", "entity_names": [], "context": None,
            "occurred_start": occurred_start, "occurred_end": None, "mentioned_at": mentioned_at,
            "document_id": None, "metadata": None, "chunk_id": None, "tags": None, "source_memory_ids": None}


def test_each_date_is_written_as_isoformat_writes_it() -> None:
    base = datetime(2026, 12, 4, 8, 35, 39, 799577, tzinfo=UTC)
    dates = [base + timedelta(microseconds=n) for n in range(3)] * 2 + [base.replace(microsecond=0)]
    for when in dates:
        result = result_payload(row(when, occurred_start=when - timedelta(days=400)))
        assert result["mentioned_at"] == when.isoformat()
        assert result["occurred_start"] == (when - timedelta(days=400)).isoformat()


def test_a_naive_date_is_not_written_as_an_aware_one() -> None:
    aware = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    naive = aware.replace(tzinfo=None)
    assert result_payload(row(aware))["mentioned_at"] == "2024-05-01T12:00:00+00:00"
    assert result_payload(row(naive))["mentioned_at"] == "2024-05-01T12:00:00"
