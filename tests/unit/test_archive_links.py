"""An archive's `links.json` is read a batch at a time (`LinksEntry`): written by Engram one link a
line, or pretty-printed as older Engram archives were. Being read in batches, it does not count
toward the archive's inflated-size limit, nor do the documents (each parsed alone); they are bounded
instead against a ZIP bomb (inflating past 100 times their compressed size), a document to 256 MB,
and links.json line by line (no link past 64 kB)."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest

from engram.errors import InvalidInput
from engram.transfer import archive as archive_module
from engram.transfer.archive import Archive, ArchiveWriter, LinksEntry, read_archive

LINKS = [{"from": {"document_id": f"d{n}", "fact_index": 0}, "to": {"document_id": "d0", "fact_index": n},
          "link_type": "semantic", "weight": n / 10} for n in range(5)]
MANIFEST = {"schema_version": 1, "source_bank_id": "b"}


def written_by_engram() -> bytes:
    buffer = io.BytesIO()
    writer = ArchiveWriter(buffer)
    writer.write_contents(Archive(manifest=MANIFEST))
    writer.add_links(LINKS[:2])
    writer.add_links(LINKS[2:])
    writer.finish(MANIFEST)
    return buffer.getvalue()


def with_links_file(text: str, compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("links.json", text)
    return buffer.getvalue()


@pytest.mark.parametrize("archive", [written_by_engram(), with_links_file(json.dumps(LINKS, indent=2))],
                         ids=["a-link-a-line", "pretty-printed"])
def test_links_come_in_batches_of_the_size_asked(archive: bytes) -> None:
    links = read_archive(archive).links
    assert isinstance(links, LinksEntry)
    assert list(links.batches(2)) == [LINKS[:2], LINKS[2:4], LINKS[4:]]
    assert list(links) == LINKS


@pytest.mark.parametrize(("archive", "count", "parses"), [
    (written_by_engram(), len(LINKS), 0),
    (with_links_file("[\n]\n"), 0, 0),
    (with_links_file(json.dumps(LINKS, indent=2)), len(LINKS), 1),
    (with_links_file(json.dumps(LINKS)), len(LINKS), 1),
], ids=["a-link-a-line", "none", "pretty-printed", "one-line"])
def test_links_are_counted_without_parsing_them_when_written_a_link_a_line(
    archive: bytes, count: int, parses: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # for an import's progress, when the manifest has no link_count (archives from before it)
    links = read_archive(archive).links
    assert isinstance(links, LinksEntry)
    parsed: list[str] = []
    loads = json.loads
    monkeypatch.setattr(archive_module.json, "loads", lambda text, *a, **k: parsed.append(text) or loads(text, *a, **k))
    assert links.count_items() == count
    assert len(parsed) == parses


def test_an_archive_without_links_has_none_and_one_with_none_has_an_empty_list() -> None:
    assert read_archive(with_links_file("[]")).links is not None
    assert list(read_archive(with_links_file("[\n]\n")).links or ["missing"]) == []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
    assert read_archive(buffer.getvalue()).links is None  # the importer rebuilds the links


def test_a_broken_link_line_names_the_file_and_line() -> None:
    with pytest.raises(InvalidInput, match="links.json in the archive, line 3"):
        list(read_archive(with_links_file('[\n{"link_type": "semantic"},\n{broken\n]')).links)


def test_a_link_line_past_the_limit_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    line = json.dumps(LINKS[0])
    monkeypatch.setattr(archive_module, "MAX_LINK_LINE_CHARS", len(line) + 1)  # the line and its comma
    at_the_limit = with_links_file("[\n" + ",\n".join([line] * 3) + "\n]\n")
    assert list(read_archive(at_the_limit).links or []) == [LINKS[0]] * 3
    longer = json.dumps({**LINKS[0], "weight": 0.123})
    with pytest.raises(InvalidInput, match="links.json in the archive, line 3, is longer than"):
        list(read_archive(with_links_file(f"[\n{line},\n{longer},\n{line}\n]\n")).links or [])


def test_documents_and_links_do_not_count_toward_the_inflated_size_but_bombs_are_refused(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_module, "MAX_UNCOMPRESSED_BYTES", 300)
    many = "[\n" + ",\n".join(json.dumps(link) for link in LINKS * 4) + "\n]\n"
    document = {"id": "d", "original_text": "Amara sails to Lisbon in May. " * 12}
    assert len(many) > 300 and len(json.dumps(document)) > 300
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("documents/000000.json", json.dumps(document))
        zf.writestr("links.json", many)
    archive = read_archive(buffer.getvalue())
    assert list(archive.documents) == [document] and list(archive.links or []) == LINKS * 4

    held = io.BytesIO()
    with zipfile.ZipFile(held, "w") as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("mental_models.json", json.dumps([{"name": "x" * 400}]))
    with pytest.raises(InvalidInput, match="inflates to more than 300 bytes"):
        read_archive(held.getvalue())

    bomb = with_links_file("[\n" + " " * 2_000_000 + "\n]\n", zipfile.ZIP_DEFLATED)
    with pytest.raises(InvalidInput, match="links.json inflates more than 100 times"):
        read_archive(bomb)
    document_bomb = io.BytesIO()
    with zipfile.ZipFile(document_bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("documents/000000.json", json.dumps({"id": "d", "original_text": " " * 2_000_000}))
    with pytest.raises(InvalidInput, match="documents/000000.json inflates more than 100 times"):
        read_archive(document_bomb.getvalue())
    monkeypatch.setattr(archive_module, "MAX_DOCUMENT_BYTES", 200)
    with pytest.raises(InvalidInput, match="documents/000000.json inflates to more than 200 bytes"):
        read_archive(buffer.getvalue())


def test_a_link_whose_end_is_no_place_or_no_imported_fact_is_left_out() -> None:
    from engram.transfer.fact_places import FactPlaces, place_of
    from engram.transfer.import_rows import link_rows

    assert place_of({"document_id": "d", "fact_index": 2}) == ("d", 2)
    assert place_of({"document_id": "d", "fact_index": 2.0}) == ("d", 2), "as JSON numbers may come"
    for ref in (None, "d", {"document_id": "d"}, {"document_id": 7, "fact_index": 0},
                {"document_id": "d", "fact_index": "0"}, {"document_id": "d", "fact_index": True},
                {"document_id": "d", "fact_index": 1.5}):
        assert place_of(ref) is None, ref
    places = FactPlaces()
    a0, b0, b1 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    places.add("a", [a0])
    places.add("b", [b0, b1])
    good = {"from": {"document_id": "a", "fact_index": 0}, "to": {"document_id": "b", "fact_index": 1},
            "link_type": "semantic", "weight": 0.5}
    elsewhere = [{"document_id": "b", "fact_index": "x"}, {"document_id": "b", "fact_index": 2},
                 {"document_id": "c", "fact_index": 0}, {"document_id": "b", "fact_index": -1}]
    links = [good, {**good, "link_type": "entity"}, "junk", *({**good, "to": to} for to in elsewhere)]
    assert link_rows(links, places) == [(a0.hex, b1.hex, "semantic", 0.5)]


def test_a_document_met_again_takes_its_later_facts_places_and_every_fact_comes_in_batches() -> None:
    from engram.transfer.fact_places import FactPlaces

    places = FactPlaces()
    first, later = [uuid.uuid4() for _ in range(3)], [uuid.uuid4() for _ in range(2)]
    other = uuid.uuid4()
    places.add("d", first)
    places.add("e", [other])
    places.add("d", later)
    assert [places.get(("d", i)) for i in range(3)] == [*later, None]
    assert places.get(("e", 0)) == other
    assert list(places.batches(4)) == [[*first, other], later]
