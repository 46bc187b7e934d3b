"""A bank export writes its links a batch at a time (20,000 links a step: a 100,000-memory bank has
~5 million, which as one list took gigabytes). Here three links a step: every link of the bank must
still be in the archive's `links.json`, each end at its fact's place in the archive."""

from __future__ import annotations

import tempfile

import asyncpg
import pytest

from engram import Memory
from engram.api.app import close_services, open_services
from engram.settings import Settings
from engram.transfer import handlers
from engram.transfer.archive import read_archive

BANK = "harbour"


async def test_an_export_written_a_few_links_at_a_time_holds_every_link_of_the_bank(
    isolated_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory(database_url=isolated_dsn)
    try:
        for n in range(4):  # alike facts on one day: semantic and temporal links
            memory.retain(BANK, f"Ines repaired the red boat number {n} at the harbour on Monday.",
                          document_id=f"log-{n}", timestamp="2026-06-01T09:00:00Z")
    finally:
        memory.close()
    conn = await asyncpg.connect(isolated_dsn)
    try:
        stored = await conn.fetch("SELECT from_unit, to_unit, link_type FROM memory_links WHERE bank_id = $1", BANK)
    finally:
        await conn.close()
    assert len(stored) > 6, "more than two batches of three"

    monkeypatch.setattr(handlers, "LINK_BATCH", 3)
    services = await open_services(Settings(database_url=isolated_dsn, worker_enabled=False))
    try:
        with tempfile.TemporaryFile() as spool:
            manifest = await handlers.write_export(services, BANK, {}, spool)
            spool.seek(0)
            archive = read_archive(spool.read())
    finally:
        await close_services(services)

    assert manifest["fact_count"] == 4
    place = {fact["source_id"]: (document["id"], index)
             for document in archive.documents for index, fact in enumerate(document["facts"])}
    expected = sorted((place[str(row["from_unit"])], place[str(row["to_unit"])], row["link_type"]) for row in stored)
    written = sorted(((link["from"]["document_id"], link["from"]["fact_index"]),
                      (link["to"]["document_id"], link["to"]["fact_index"]), link["link_type"])
                     for link in archive.links or [])
    assert written == expected
