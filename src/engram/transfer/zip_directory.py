"""A ZIP archive's directory that the garbage collector does not walk, writing or reading one.

`zipfile.ZipFile` keeps a `ZipInfo` per entry (in `filelist`, and by name in `NameToInfo`): writing,
to write the archive's central directory when it closes; reading, to find an entry when it is
opened. A `ZipInfo` is an object the cyclic collector tracks, and an archive has an entry per
document: every full collection walked all of them, ~30 ms each at 100,000 documents and 0.3–0.4 s
at a million, a stall of every request each time, for as long as an export or an import runs. Here
each entry is kept as a tuple of its fields (strings, numbers, bytes), which the collector stops
tracking after its first pass, and a `ZipInfo` is made again for an entry only when it is needed: as
the directory is written, or as the entry is opened. The fields are read from `ZipInfo.__slots__`,
so nothing here depends on which of them a Python version has."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterator
from typing import Any

YIELD_EVERY = 500  # entries made again between two hand-overs of the GIL
_UNSET = object()  # a slot the entry never set (not tracked by the collector either)


def _row(info: zipfile.ZipInfo) -> tuple[Any, ...]:
    return tuple(getattr(info, slot, _UNSET) for slot in zipfile.ZipInfo.__slots__)


def _info(row: tuple[Any, ...]) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo.__new__(zipfile.ZipInfo)
    for slot, value in zip(zipfile.ZipInfo.__slots__, row, strict=True):
        if value is not _UNSET:
            setattr(info, slot, value)
    return info


class _Entries:
    """Stands in for `ZipFile.filelist`: what `ZipFile` does with it is append an entry (writing),
    count them and, on closing (writing) or when asked (`namelist`, `infolist`), read them in order."""

    def __init__(self, rows: list[tuple[Any, ...]] | None = None) -> None:
        self._rows: list[tuple[Any, ...]] = rows if rows is not None else []

    def append(self, info: zipfile.ZipInfo) -> None:
        self._rows.append(_row(info))

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[zipfile.ZipInfo]:
        for number, row in enumerate(self._rows):
            if number % YIELD_EVERY == YIELD_EVERY - 1:
                # Let the event loop's thread have the GIL: left to the interpreter's switching, a
                # thread writing 100,000 entries this way held every request for 100-250 ms at times.
                time.sleep(0)
            yield _info(row)


class _Names(dict):
    """Stands in for `ZipFile.NameToInfo` while writing: the names written (a duplicate is warned
    about), without their `ZipInfo`."""

    def __setitem__(self, name: str, info: object) -> None:
        super().__setitem__(name, None)


class _RowsByName(dict):
    """Stands in for `ZipFile.NameToInfo` while reading: each entry's row by its name, a `ZipInfo`
    made again from it when the entry is looked up (`getinfo`, `open`, `read`)."""

    def get(self, name: str, default: Any = None) -> Any:
        row = super().get(name)
        return default if row is None else _info(row)

    def __getitem__(self, name: str) -> zipfile.ZipInfo:
        return _info(super().__getitem__(name))


def compact_read_directory(zf: zipfile.ZipFile) -> zipfile.ZipFile:
    """`zf`, opened to read, keeping its directory compact from now on. Its `ZipInfo`s, read when it
    was opened, go (freed at once: nothing else holds them)."""
    if zf.mode != "r":
        raise ValueError("a compact read directory is for an archive opened to read")
    rows = [_row(info) for info in zf.filelist]
    zf.NameToInfo = _RowsByName((info.filename, row) for info, row in zip(zf.filelist, rows, strict=True))
    zf.filelist = _Entries(rows)  # type: ignore[assignment]
    return zf


def compact_directory(zf: zipfile.ZipFile) -> zipfile.ZipFile:
    """`zf`, opened to write and nothing written yet, keeping its directory compact."""
    if zf.mode != "w" or zf.filelist:
        raise ValueError("a compact directory is for a new archive being written")
    zf.filelist = _Entries()  # type: ignore[assignment]
    zf.NameToInfo = _Names()
    return zf
