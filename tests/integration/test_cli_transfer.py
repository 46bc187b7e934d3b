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
    output = ok(engram(server, "import-hindsight", str(HINDSIGHT_ARCHIVE), "--bank", bank_id))
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
