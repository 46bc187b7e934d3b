"""An archive's `observations.json`: an export writes it a batch at a time, an observation a line
(`ArchiveWriter.add_observations`), and a reader parses such a file a line at a time, so that a
thread reading a big one never holds the GIL (and the event loop) for the whole file, as one
`json.loads` of 50,000 observations did for 0.4–0.6 s. Hindsight's archives (pretty-printed) are
parsed whole, as before."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from engram.errors import InvalidInput
from engram.transfer import archive as archive_module
from engram.transfer.archive import Archive, ArchiveWriter, read_archive

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
    assert read_archive(data).observations == OBSERVATIONS
    longest_line = max(len(json.dumps(o, ensure_ascii=False)) for o in OBSERVATIONS)
    assert max(parsed) <= longest_line < len(text) // 2, "never the whole file in one parse"


def test_pretty_printed_and_empty_observations_are_read_whole() -> None:
    assert read_archive(with_observations_file(json.dumps(OBSERVATIONS, indent=2))).observations == OBSERVATIONS
    assert read_archive(with_observations_file("[]")).observations == []
    assert read_archive(with_observations_file("[\n]\n")).observations == []
    assert read_archive(written_a_batch_at_a_time()).manifest == MANIFEST


def test_a_broken_observation_line_names_the_file_and_line() -> None:
    broken = "[\n" + json.dumps(OBSERVATIONS[0]) + ",\n{broken\n]\n"
    with pytest.raises(InvalidInput, match="observations.json in the archive, line 3, is not JSON"):
        read_archive(with_observations_file(broken))
    with pytest.raises(InvalidInput, match="observations.json in the archive is not JSON"):
        read_archive(with_observations_file("[{"))
