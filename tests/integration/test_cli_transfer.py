"""`engram import-hindsight` against a live server: the real Hindsight archive into a new bank, with a
summary whose counts are the archive's; a second restore into the same bank is refused."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.conftest import RunningServer
from tests.integration.test_cli import engram, ok
from tests.integration.test_transfer import HINDSIGHT_ARCHIVE


@pytest.mark.skipif(not HINDSIGHT_ARCHIVE.exists(), reason="the Hindsight archive is in ../shared/data")
def test_import_hindsight_archive_from_the_cli(server: RunningServer, bank_id: str) -> None:
    with zipfile.ZipFile(HINDSIGHT_ARCHIVE) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    run = engram(server, "import-hindsight", str(HINDSIGHT_ARCHIVE), "--bank", bank_id)
    output = ok(run)
    assert f"{HINDSIGHT_ARCHIVE.name}: completed" in run.stderr, "progress, on stderr"
    assert f"into bank '{bank_id}'" in output
    assert f"documents imported: {manifest['document_count']}" in output
    assert f"facts imported: {manifest['fact_count']}" in output
    assert f"observations imported: {manifest['observation_count']}" in output
    stats = ok(engram(server, "stats", bank_id))
    assert str(manifest["fact_count"] + manifest["observation_count"]) in stats

    again = engram(server, "import-hindsight", str(HINDSIGHT_ARCHIVE), "--bank", bank_id)
    assert again.returncode != 0 and "already exists" in again.stderr
    merged = ok(engram(server, "import-hindsight", str(HINDSIGHT_ARCHIVE), "--bank", bank_id, "--merge"))
    assert f"documents skipped: {manifest['document_count']}" in merged


def test_retain_and_import_take_files_the_server_converts(server: RunningServer, bank_id: str, tmp_path) -> None:
    from tests.integration.test_files_retain import make_docx, make_pdf

    (tmp_path / "log.pdf").write_bytes(make_pdf())
    (tmp_path / "onboarding.docx").write_bytes(make_docx())
    result = json.loads(ok(engram(server, "retain", bank_id, "--file", str(tmp_path / "log.pdf"),
                                  "--document-id", "log", "--tag", "ops")))
    assert result["document_id"] == "log" and result["format"] == "pdf" and result["facts"] >= 1
    imported = json.loads(ok(engram(server, "import", bank_id, str(tmp_path / "onboarding.docx"))))
    assert imported["format"] == "docx"
    listed = ok(engram(server, "recall", bank_id, "Who serviced the boiler?"))
    assert "Nadia Petrova" in listed.splitlines()[0]
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 nothing")
    failed = engram(server, "retain", bank_id, "--file", str(broken))
    assert failed.returncode == 1 and "broken.pdf" in failed.stderr
