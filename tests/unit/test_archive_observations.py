"""An archive's `observations.json`: an export writes it a batch at a time, an observation a line
(`ArchiveWriter.add_observations`), and a reader (`ObservationsEntry`) parses such a file a line at
a time, as the import takes them, a batch at a time: a thread reading a big one never holds the GIL
(and the event loop) for the whole file, as one `json.loads` of 50,000 observations did for
0.4–0.6 s, and the importing server never holds them all. The archive is read through once when it
is opened, each observation checked and counted. Hindsight's archives (one line) are parsed whole."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from engram.errors import InvalidInput
from engram.transfer import archive as archive_module
from engram.transfer.archive import Archive, ArchiveWriter, ObservationsEntry, read_archive

MANIFEST = {"schema_version": 1, "source_bank_id": "b"}
OBSERVATIONS = [
    {"source_id": f"o{n}", "text": f"Ines sails on {day}s.\nShe says \"always\" \\ never", "tags": ["boats"],
     "sources": [{"document_id": "log-1", "fact_index": n}], "evidence": [], "history": []}
    for n, day in enumerate(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"])
]


def written_a_batch_at_a_time() -> bytes:
    buffer = io.BytesIO()
    writer = ArchiveWriter(buffer)
    writer.add_observations(OBSERVATIONS[:2])
    writer.add_observations([])
    writer.add_observations(OBSERVATIONS[2:])
    writer.write_tables(Archive(manifest=MANIFEST))
    writer.finish(MANIFEST)
    return buffer.getvalue()


def with_observations_file(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("observations.json", text)
    return buffer.getvalue()


class ParsedLengths(list):
    """The length of every text `json.loads` parses in the archive module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        loads = json.loads

        def recording(text: Any, *args: Any, **kwargs: Any) -> Any:
            self.append(len(text))
            return loads(text, *args, **kwargs)

        monkeypatch.setattr(archive_module.json, "loads", recording)


def test_observations_written_a_batch_at_a_time_are_read_back_a_line_at_a_time(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    data = written_a_batch_at_a_time()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        text = zf.read("observations.json").decode()
    assert text.count("\n") == len(OBSERVATIONS) + 2  # `[`, an observation a line, `]`
    parsed = ParsedLengths(monkeypatch)
    observations = read_archive(data).observations
    assert isinstance(observations, ObservationsEntry) and len(observations) == len(OBSERVATIONS)
    assert list(observations) == OBSERVATIONS
    longest_line = max(len(json.dumps(o, ensure_ascii=False)) for o in OBSERVATIONS)
    assert max(parsed) <= longest_line < len(text) // 2, "never the whole file in one parse"


def test_observations_are_parsed_as_the_import_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    observations = read_archive(written_a_batch_at_a_time()).observations
    assert isinstance(observations, ObservationsEntry)
    parsed = ParsedLengths(monkeypatch)  # counted, the archive's observations are parsed again as taken
    batches = observations.batches(2)
    assert next(batches) == OBSERVATIONS[:2]
    assert len(parsed) == 2, "a batch read is as many observations parsed, the rest not yet"
    assert list(batches) == [OBSERVATIONS[2:4], OBSERVATIONS[4:]]
    assert len(parsed) == len(OBSERVATIONS)


@pytest.mark.parametrize("text", [json.dumps(OBSERVATIONS), json.dumps(OBSERVATIONS, indent=2)],
                         ids=["one-line", "pretty-printed"])
def test_observations_in_one_line_or_pretty_printed_are_read_whole_and_still_come_in_batches(text: str) -> None:
    observations = read_archive(with_observations_file(text)).observations
    assert len(observations) == len(OBSERVATIONS)
    assert isinstance(observations, ObservationsEntry)
    assert list(observations.batches(3)) == [OBSERVATIONS[:3], OBSERVATIONS[3:]]


def test_empty_and_missing_observations() -> None:
    for text in ("[]", "[\n]\n"):
        observations = read_archive(with_observations_file(text)).observations
        assert len(observations) == 0 and list(observations) == []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
    assert read_archive(buffer.getvalue()).observations == []
    assert read_archive(written_a_batch_at_a_time()).manifest == MANIFEST


def test_a_broken_observation_line_names_the_file_and_line() -> None:
    broken = "[\n" + json.dumps(OBSERVATIONS[0]) + ",\n{broken\n]\n"
    with pytest.raises(InvalidInput, match="observations.json in the archive, line 3, is not JSON"):
        read_archive(with_observations_file(broken))
    with pytest.raises(InvalidInput, match="observations.json in the archive is not JSON"):
        read_archive(with_observations_file("[{"))


def a_line_each(*observations: object) -> str:
    return "[\n" + ",\n".join(json.dumps(o) for o in observations) + "\n]\n"


@pytest.mark.parametrize(("text", "message"), [
    (a_line_each(OBSERVATIONS[0], ["not", "an", "object"]), "observations.json in the archive, line 3, is not a JSON"),
    (json.dumps([OBSERVATIONS[0], 7]), "observations.json in the archive is not a JSON array of objects"),
    (json.dumps({"text": "one"}), "observations.json in the archive is not a JSON array of objects"),
    (a_line_each(OBSERVATIONS[0], {"sources": []}), "observation 2 in observations.json has no text"),
    (a_line_each({**OBSERVATIONS[0], "text": 5}), "observation 1 in observations.json has no text"),
    (a_line_each({**OBSERVATIONS[0], "sources": {"document_id": "d"}}), "observation 1 .*: sources is not a list"),
    (a_line_each({**OBSERVATIONS[0], "evidence": ["quote"]}), "observation 1 in observations.json: evidence is"),
    (a_line_each({**OBSERVATIONS[0], "history": [{"reason": "new"}]}), "observation 1 .* history has no text"),
], ids=["line-not-object", "item-not-object", "not-an-array", "no-text", "text-not-string", "sources",
        "evidence", "history"])
def test_an_observation_the_import_could_not_read_is_refused_when_the_archive_is_read(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        read_archive(with_observations_file(text))


def test_an_observation_line_past_the_limit_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    line = json.dumps(OBSERVATIONS[0])
    monkeypatch.setattr(archive_module, "MAX_OBSERVATION_LINE_CHARS", len(line) + 1)  # the line and its comma
    assert len(read_archive(with_observations_file(a_line_each(*[OBSERVATIONS[0]] * 3))).observations) == 3
    longer = json.dumps({**OBSERVATIONS[0], "text": OBSERVATIONS[0]["text"] + "!"})
    with pytest.raises(InvalidInput, match="observations.json in the archive, line 3, is longer than"):
        read_archive(with_observations_file(f"[\n{line},\n{longer},\n{line}\n]\n"))


def test_observations_do_not_count_toward_the_inflated_size_but_a_bomb_or_a_big_whole_file_is_refused(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_module, "MAX_UNCOMPRESSED_BYTES", 300)
    assert len(a_line_each(*OBSERVATIONS)) > 300
    assert len(read_archive(with_observations_file(a_line_each(*OBSERVATIONS))).observations) == len(OBSERVATIONS)
    with pytest.raises(InvalidInput, match="observations.json in the archive is not one item a line and inflates"):
        read_archive(with_observations_file(json.dumps(OBSERVATIONS)))
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("observations.json", "[\n" + " " * 2_000_000 + "\n]\n")
    with pytest.raises(InvalidInput, match="observations.json inflates more than 100 times"):
        read_archive(bomb.getvalue())
