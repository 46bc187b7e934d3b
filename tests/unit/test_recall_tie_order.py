"""Facts of equal score are ordered by what they hold, never by their ids: text, then when they were
said or happened (undated first, then oldest first, to the microsecond), then their document."""

from __future__ import annotations

from datetime import UTC, datetime

from engram.recall.pipeline import content_order


def fact(text: str, document: str | None, occurred: datetime | None = None, mentioned: datetime | None = None) -> dict:
    return {"text": text, "document_id": document, "occurred_start": occurred, "mentioned_at": mentioned}


def test_equal_scores_order_by_text_then_date_then_document() -> None:
    noon = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    half_second_later = datetime(2024, 5, 1, 12, 0, 0, 500_000, tzinfo=UTC)
    later_day = datetime(2024, 5, 2, 9, 0, tzinfo=UTC)
    expected = [
        fact("Bye!", "b"),  # undated
        fact("Bye!", "a", mentioned=noon),
        fact("Bye!", "b", mentioned=noon),
        fact("Bye!", "a", mentioned=half_second_later),
        fact("Bye!", "a", occurred=later_day, mentioned=noon),  # its event date counts, not when it was said
        fact("Hello!", None, mentioned=noon),
    ]
    for shuffled in (expected[::-1], expected[2:] + expected[:2], expected[1::2] + expected[::2]):
        assert sorted(shuffled, key=content_order) == expected
