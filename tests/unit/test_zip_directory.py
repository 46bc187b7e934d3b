"""An archive being written or read keeps its ZIP directory as plain tuples
(`transfer/zip_directory.py`), not as a `ZipInfo` per entry that every full garbage collection
walks: an export writes an entry per document and an import reads one, and a million documents made
each full collection ~0.3 s, a stall of every request, for as long as the export or import ran.
What is written must read back as any ZIP does, and what is read must read as `zipfile` reads it."""

from __future__ import annotations

import gc
import io
import zipfile

import pytest

from engram.transfer.archive import Archive, ArchiveWriter, read_archive
from engram.transfer.zip_directory import compact_directory, compact_read_directory

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
    with zipfile.ZipFile(io.BytesIO(), "w") as zf, pytest.raises(ValueError):
        compact_read_directory(zf)


def test_an_archive_read_with_a_compact_directory_reads_as_zipfile_reads_it() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(40):
            zf.writestr(f"compact-r/{n:03d}.json", f'{{"n": {n}}}')
        zf.writestr("compact-r/stored.bin", b"\x00\xff" * 10, compress_type=zipfile.ZIP_STORED)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as plain:
        expected = {info.filename: (plain.read(info), info.file_size, info.compress_type, info.CRC)
                    for info in plain.infolist()}
    del plain  # (and its ZipInfos)
    with compact_read_directory(zipfile.ZipFile(io.BytesIO(buffer.getvalue()))) as zf:
        assert tracked_entries("compact-r/") == 0, "no ZipInfo kept while reading"
        assert zf.namelist() == list(expected)
        for name, (data, size, compression, crc) in expected.items():
            info = zf.getinfo(name)
            assert (zf.read(name), info.file_size, info.compress_type, info.CRC) == (data, size, compression, crc)
        with zf.open("compact-r/003.json") as first, zf.open("compact-r/004.json") as second:
            assert (first.read(), second.read()) == (b'{"n": 3}', b'{"n": 4}'), "two entries open at once"
        assert zf.testzip() is None
        with pytest.raises(KeyError):
            zf.getinfo("compact-r/missing.json")


def test_a_read_archive_keeps_no_zipinfo_per_document_while_its_entries_are_read() -> None:
    buffer = io.BytesIO()
    writer = ArchiveWriter(buffer)
    writer.add_documents([{"id": f"read-{n}", "facts": []} for n in range(30)])
    writer.add_observations([{"text": "Ada rows.", "sources": []}])
    writer.write_tables(Archive(manifest=MANIFEST))
    writer.add_links([{"link_type": "semantic"}])
    writer.finish(MANIFEST)
    archive = read_archive(buffer.getvalue())
    documents = iter(archive.documents)
    assert next(documents)["id"] == "read-0"
    assert tracked_entries("documents/") == 0, "none while the documents are read"
    assert [document["id"] for document in documents] == [f"read-{n}" for n in range(1, 30)]
    assert list(archive.links or []) == [{"link_type": "semantic"}]
    assert list(archive.observations) == [{"text": "Ada rows.", "sources": []}]
    assert tracked_entries("documents/") == 0
