"""An archive being written keeps its ZIP directory as plain tuples (`transfer/zip_directory.py`),
not as a `ZipInfo` per entry that every full garbage collection walks: an export writes an entry
per document, and a million documents made each full collection ~0.3–0.4 s, a stall of every request.
What is written must read back as any ZIP does."""

from __future__ import annotations

import gc
import io
import zipfile

import pytest

from engram.transfer.archive import ArchiveWriter, read_archive
from engram.transfer.zip_directory import compact_directory

MANIFEST = {"schema_version": 1, "source_bank_id": "b"}


def tracked_entries(prefix: str) -> int:
    """How many `ZipInfo` objects the garbage collector tracks for entries named `prefix…`."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, zipfile.ZipInfo) and o.filename.startswith(prefix))


def test_entries_written_with_a_compact_directory_read_back_as_written() -> None:
    buffer = io.BytesIO()
    with compact_directory(zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED)) as zf:
        for n in range(50):
            zf.writestr(f"compact-a/{n:03d}.json", f'{{"n": {n}}}')
        with zf.open("compact-a/streamed.json", "w", force_zip64=True) as streamed:
            streamed.write(b"[1, 2]")
        del streamed  # (an open entry's writer holds its own ZipInfo)
        zf.writestr("compact-a/stored.bin", b"\x00\xff" * 10, compress_type=zipfile.ZIP_STORED)
        assert tracked_entries("compact-a/") == 0, "no ZipInfo kept while writing"
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("compact-a/000.json", "again")
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        assert names[:50] == [f"compact-a/{n:03d}.json" for n in range(50)]
        assert names[50:] == ["compact-a/streamed.json", "compact-a/stored.bin", "compact-a/000.json"]
        assert zf.read("compact-a/007.json") == b'{"n": 7}'
        assert zf.read("compact-a/streamed.json") == b"[1, 2]"
        assert zf.getinfo("compact-a/stored.bin").compress_type == zipfile.ZIP_STORED


def test_an_archive_writer_keeps_no_zipinfo_per_document() -> None:
    buffer = io.BytesIO()
    writer = ArchiveWriter(buffer)
    writer.add_documents([{"id": f"doc-{n}", "facts": []} for n in range(30)])
    assert tracked_entries("documents/") == 0
    writer.finish(MANIFEST)
    assert [document["id"] for document in read_archive(buffer.getvalue()).documents] == [
        f"doc-{n}" for n in range(30)]


def test_only_a_new_archive_being_written_takes_a_compact_directory() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("one", "1")
        with pytest.raises(ValueError):
            compact_directory(zf)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as zf, pytest.raises(ValueError):
        compact_directory(zf)
