"""The `engram` command line as a client of a running server: retain text or a file, recall, banks,
documents, operations; global options anywhere; user errors as one line with exit code 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM


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
    summary = ok(engram(server, "retain", bank_id, "Grandma Rosa bakes almond cookies every Sunday.")).splitlines()
    assert summary[0].startswith(f"stored 1 fact in {bank_id}, document ")
    document_id = summary[0].rsplit(" ", 1)[1]
    assert summary[1].startswith("entities (1): ") and "Rosa" in summary[1]
    stored = httpx.get(f"{server.url}/v1/default/banks/{bank_id}/documents/{document_id}").json()
    assert stored["memory_unit_count"] == 1, "the summary names the document the fact is in"

    answer = json.loads(ok(engram(server, "retain", bank_id, "Rosa's oven is from 1974.", "--json")))
    assert (answer["success"], answer["bank_id"], answer["items_count"]) == (True, bank_id, 1)

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


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The error of a failed command: exit code 1, one line on stderr, no traceback."""
    assert result.returncode == 1, f"exit {result.returncode}: {result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: "), result.stderr
    return lines[0]


def test_errors_are_one_line_saying_what_to_do(server: RunningServer, tmp_path: Path) -> None:
    missing = one_line_error(engram(server, "recall", "no-such-bank-cli", "anything"))
    assert "bank 'no-such-bank-cli' not found" in missing and "engram banks" in missing and "404" in missing

    nothing = one_line_error(engram(server, "retain", "some-bank"))
    assert "--file" in nothing
    no_file = one_line_error(engram(server, "retain", "some-bank", "--file", str(tmp_path / "absent.txt")))
    assert "cannot read" in no_file and "absent.txt" in no_file and "No such file" in no_file
    (tmp_path / "a.txt").write_text("file text")
    both = one_line_error(engram(server, "retain", "some-bank", "typed text", "--file", str(tmp_path / "a.txt")))
    assert "not both" in both
    bad_id = one_line_error(engram(server, "stats", "team/alpha"))
    assert "'team/alpha' is not a bank id" in bad_id and "'/'" in bad_id
    no_doc = one_line_error(engram(server, "documents", "delete", "no-such-bank-cli", "doc-1"))
    assert "not found" in no_doc

    unreachable = one_line_error(subprocess.run(
        [sys.executable, "-m", "engram.cli", "--url", "http://127.0.0.1:9", "banks"],
        capture_output=True, text=True, timeout=60,
    ))
    assert "cannot reach the Engram server at http://127.0.0.1:9" in unreachable and "engram serve" in unreachable


def test_global_options_go_before_or_after_the_command(server: RunningServer, bank_id: str) -> None:
    ok(engram(server, "retain", bank_id, "The tram to Belém leaves every ten minutes."))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    after = subprocess.run([sys.executable, "-m", "engram.cli", "banks", "--url", server.url],
                           capture_output=True, text=True, timeout=60, env=env)
    assert f"{bank_id}\t1 memories" in ok(after)
    version = subprocess.run([sys.executable, "-m", "engram.cli", "--version"], capture_output=True, text=True)
    from engram import __version__

    assert ok(version).strip() == f"engram {__version__}"


def test_an_api_key_is_given_before_or_after_the_command(pg_dsn: str, bank_id: str) -> None:
    from tests.conftest import separate_database, start_server

    with separate_database(pg_dsn) as dsn:
        keyed = start_server(dsn, {"ENGRAM_API_KEYS": "cli-secret"}, name="cli-keys")
        try:
            refused = one_line_error(engram(keyed, "banks"))
            assert "wants an API key" in refused and "--api-key" in refused
            ok(engram(keyed, "retain", bank_id, "Keys open doors.", "--api-key", "cli-secret"))
            assert bank_id in ok(engram(keyed, "--api-key", "cli-secret", "banks"))
        finally:
            keyed.stop()


def test_documents_are_listed_and_deleted_and_a_bank_deleted(server: RunningServer, bank_id: str) -> None:
    ok(engram(server, "retain", bank_id, "The greenhouse needs new glass.", "--document-id", "garden"))
    ok(engram(server, "retain", bank_id, "The attic has a leak. The stairs creak.", "--document-id", "house"))
    listed = ok(engram(server, "documents", "list", bank_id))
    rows = sorted(line.split("\t")[:2] for line in listed.splitlines())
    assert rows == [["garden", "1 facts"], ["house", "2 facts"]]

    assert ok(engram(server, "documents", "delete", bank_id, "house")).strip() == "deleted document house (2 facts)"
    assert [line.split("\t")[0] for line in ok(engram(server, "documents", "list", bank_id)).splitlines()] == ["garden"]

    unconfirmed = one_line_error(engram(server, "bank", "delete", bank_id))
    assert "--yes" in unconfirmed
    assert ok(engram(server, "bank", "delete", bank_id, "--yes")).strip() == f"deleted bank {bank_id}"
    assert bank_id not in ok(engram(server, "banks"))


def test_operations_are_listed_and_retried_and_consolidation_queued(
    llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = lambda request: Reply.error(500, "upstream model crashed")
    ok(engram(llm_server, "retain", bank_id, "Chloe adopted a grey cat.", "--async"))
    deadline = time.monotonic() + 30
    while "failed" not in (listed := ok(engram(llm_server, "operations", "list", bank_id))):
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)
    (row,) = listed.splitlines()
    operation_id, kind, status, _, error = row.split("\t")
    assert (kind, status) == ("retain", "failed") and "500" in error

    def extraction(request: object) -> dict:
        return {"facts": [{"what": "Chloe adopted a grey cat.", "fact_type": "world", "entities": ["Chloe"]}]}

    llm.handler = extraction
    assert ok(engram(llm_server, "operations", "retry", bank_id, operation_id)).strip() == \
        f"operation {operation_id} queued again"
    while "completed" not in ok(engram(llm_server, "operations", "list", bank_id, "--status", "completed")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    queued = ok(engram(llm_server, "consolidate", bank_id))
    assert queued.startswith("consolidation queued as operation ")
