"""The `engram` command line as a client of a running server: retain text or a file, recall, list banks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import RunningServer


def engram(server: RunningServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    return subprocess.run(
        [sys.executable, "-m", "engram.cli", "--url", server.url, *args],
        capture_output=True, text=True, timeout=60, env=env,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def test_retain_text_then_recall_it(server: RunningServer, bank_id: str) -> None:
    answer = json.loads(ok(engram(server, "retain", bank_id, "Grandma Rosa bakes almond cookies every Sunday.")))
    assert answer["success"] is True
    assert answer["bank_id"] == bank_id
    assert answer["items_count"] == 1

    output = ok(engram(server, "recall", bank_id, "What does Rosa bake?"))
    first = output.splitlines()[0]
    assert first.strip().startswith("1. [world]")
    assert "almond cookies" in first


def test_retain_a_file_with_tags_and_a_document_id(server: RunningServer, bank_id: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("The boiler was serviced in October.\n\nThe roof needs new tiles before winter.\n")
    ok(engram(server, "retain", bank_id, "--file", str(notes), "--tag", "house", "--document-id", "notes"))

    output = ok(engram(server, "recall", bank_id, "When was the boiler serviced?", "--json"))
    results = json.loads(output)["results"]
    boiler = next(r for r in results if "boiler" in r["text"])
    assert boiler["document_id"] == "notes"
    assert boiler["tags"] == ["house"]
    roof = ok(engram(server, "recall", bank_id, "roof tiles"))
    assert "roof needs new tiles" in roof.splitlines()[0], "the file's second paragraph was retained too"


def test_banks_lists_each_bank_with_its_memory_count(server: RunningServer, bank_id: str) -> None:
    ok(engram(server, "retain", bank_id, "The sailing club meets on Thursdays. The club owns three dinghies."))
    lines = ok(engram(server, "banks")).splitlines()
    (line,) = [line for line in lines if line.split("\t")[0] == bank_id]
    assert line == f"{bank_id}\t2 memories"


def test_errors_are_reported_with_a_nonzero_exit(server: RunningServer) -> None:
    missing = engram(server, "recall", "no-such-bank-cli", "anything")
    assert missing.returncode != 0
    assert "404" in missing.stderr and "no-such-bank-cli" in missing.stderr

    nothing = engram(server, "retain", "some-bank")
    assert nothing.returncode != 0
    assert "--file" in nothing.stderr

    unreachable = subprocess.run(
        [sys.executable, "-m", "engram.cli", "--url", "http://127.0.0.1:9", "banks"],
        capture_output=True, text=True, timeout=60,
    )
    assert unreachable.returncode != 0
    assert "cannot reach" in unreachable.stderr
