"""Where an import put each archived fact, by the fact's place in the archive: its document's id
there and its index among that document's facts. `links.json` and the observations' sources and
evidence name facts by place.

A document's facts are written together, so their new ids are kept packed in write order, 16 bytes
each, and a document's place in that run is all a place needs: ~16 bytes a fact and one entry a
document, where a dict of every place took ~250 bytes a fact (~2.5 GB at 10 million). A temporary
table joined to each batch of links hashed every place again per batch, which grows with the bank."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

Place = tuple[str, int]  # (the document's id in the archive, the fact's index in it)


def place_of(ref: Any) -> Place | None:
    """A fact's place as an archive names it ({document_id, fact_index}), or None if it is no place."""
    if not isinstance(ref, dict):
        return None
    return _checked(ref.get("document_id"), ref.get("fact_index"))


def _checked(document_id: Any, index: Any) -> Place | None:
    if isinstance(index, float) and index.is_integer():
        index = int(index)
    if not isinstance(document_id, str) or not isinstance(index, int) or isinstance(index, bool):
        return None
    return document_id, index


class FactPlaces:
    """The imported facts' ids in write order, and each document's run of them."""

    def __init__(self) -> None:
        self._ids = bytearray()
        self._runs: dict[str, tuple[int, int]] = {}  # source document id → (first fact's number, facts)

    def __len__(self) -> int:
        return len(self._ids) // 16

    def add(self, document_id: str, fact_ids: list[uuid.UUID]) -> None:
        """A document's facts, in their archive order; a document met again (twice in one archive)
        takes its later facts' places, as its row is the later one's."""
        self._runs[document_id] = (len(self), len(fact_ids))
        for fact_id in fact_ids:
            self._ids += fact_id.bytes

    def get(self, place: tuple[Any, Any]) -> uuid.UUID | None:
        """The fact at a place, or None (no such place, or not imported)."""
        start = self._offset(place)
        return None if start is None else uuid.UUID(bytes=bytes(self._ids[start:start + 16]))

    def id_text(self, place: tuple[Any, Any]) -> str | None:
        """The fact's id as 32 hex digits, which asyncpg takes for a uuid: a link has two ends and a
        bank millions of links, and a UUID object costs ~1 µs to build against ~0.2 µs for this."""
        start = self._offset(place)
        return None if start is None else self._ids[start:start + 16].hex()

    def _offset(self, place: tuple[Any, Any]) -> int | None:
        checked = _checked(*place)
        run = self._runs.get(checked[0]) if checked else None
        if run is None or not 0 <= checked[1] < run[1]:
            return None
        return (run[0] + checked[1]) * 16

    def batches(self, size: int) -> Iterator[list[uuid.UUID]]:
        """Every imported fact's id, `size` at a time, in write order."""
        for start in range(0, len(self._ids), 16 * size):
            chunk = bytes(self._ids[start:start + 16 * size])
            yield [uuid.UUID(bytes=chunk[i:i + 16]) for i in range(0, len(chunk), 16)]
