"""A ZIP writer's directory that the garbage collector does not walk.

`zipfile.ZipFile` keeps a `ZipInfo` per entry written (in `filelist`, and by name in `NameToInfo`) to
write the archive's central directory when it closes. A `ZipInfo` is an object the cyclic collector
tracks, and an export writes an entry per document: every full collection walked all of them, ~30 ms
each at 100,000 documents and 0.3–0.4 s at a million, a stall of every request each time. Here each
entry is kept as a tuple of its fields (strings, numbers, bytes), which the collector stops tracking
after its first pass, and a `ZipInfo` is made again for each entry only as the directory is written.
The fields are read from `ZipInfo.__slots__`, so nothing here depends on which of them a Python
version has."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterator
from typing import Any

YIELD_EVERY = 500  # entries made again between two hand-overs of the GIL
_UNSET = object()  # a slot the entry never set (not tracked by the collector either)


class _Entries:
    """Stands in for `ZipFile.filelist` while writing: what `ZipFile` does with it is append an
    entry, count them and, on closing, read them in order."""

    def __init__(self) -> None:
        self._rows: list[tuple[Any, ...]] = []

    def append(self, info: zipfile.ZipInfo) -> None:
        self._rows.append(tuple(getattr(info, slot, _UNSET) for slot in zipfile.ZipInfo.__slots__))

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[zipfile.ZipInfo]:
        for number, row in enumerate(self._rows):
            if number % YIELD_EVERY == YIELD_EVERY - 1:
                # Let the event loop's thread have the GIL: left to the interpreter's switching, a
                # thread writing 100,000 entries this way held every request for 100-250 ms at times.
                time.sleep(0)
            info = zipfile.ZipInfo.__new__(zipfile.ZipInfo)
            for slot, value in zip(zipfile.ZipInfo.__slots__, row, strict=True):
                if value is not _UNSET:
                    setattr(info, slot, value)
            yield info


class _Names(dict):
    """Stands in for `ZipFile.NameToInfo` while writing: the names written (a duplicate is warned
    about), without their `ZipInfo`."""

    def __setitem__(self, name: str, info: object) -> None:
        super().__setitem__(name, None)


def compact_directory(zf: zipfile.ZipFile) -> zipfile.ZipFile:
    """`zf`, opened to write and nothing written yet, keeping its directory compact."""
    if zf.mode != "w" or zf.filelist:
        raise ValueError("a compact directory is for a new archive being written")
    zf.filelist = _Entries()  # type: ignore[assignment]
    zf.NameToInfo = _Names()
    return zf
