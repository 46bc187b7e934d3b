"""Stored files (transfer archives, uploads) are kept in parts (migration 030): one PostgreSQL value
holds at most 1 GB, and a bank past ~500,000 memories has a bigger archive. Parts are written and read
one at a time, so no step holds a whole archive in memory. Here the parts are a few hundred bytes: a
download streams every part in order, an import reads an archive from all of its parts, and files
stored whole before the migration are moved into parts."""

from __future__ import annotations

import asyncio
import io
import json
import os
import uuid
import zipfile

import asyncpg
import httpx

from engram.store import files
from engram.store import operations as ops
from engram.store.migrate import apply_migrations
from engram.store.pool import _init_connection
from tests.conftest import separate_database
from tests.integration.test_transfer import export_archive
from tests.support.migrations import migrate_before
from tests.support.waiting import finish_operation


async def store_in_parts(dsn: str, key: str, bank_id: str, data: bytes, part_bytes: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await files.put_file(conn, key, bank_id, io.BytesIO(data), media_type="application/zip",
                             filename="transfer.zip", part_bytes=part_bytes)
        return await conn.fetchval("SELECT count(*) FROM stored_file_parts WHERE key = $1", key)
    finally:
        await conn.close()


def test_a_file_kept_in_parts_downloads_whole(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    data = os.urandom(5_500)
    key = f"banks/{bank_id}/exports/{uuid.uuid4()}/transfer.zip"
    assert asyncio.run(store_in_parts(pg_dsn, key, bank_id, data, 1_000)) == 6

    download = http.get(f"/v1/default/files/download/{key}")
    assert download.status_code == 200, download.text
    assert download.headers["content-length"] == "5500"
    assert download.content == data


def test_an_archive_kept_in_parts_imports_whole(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    texts = ["Amara sails to Lisbon in May.", "Bruno fixed the lighthouse lamp.", "Chen grows basil on the roof."]
    for n, text in enumerate(texts):
        http.post(f"/v1/default/banks/{bank_id}/memories",
                  json={"items": [{"content": text, "document_id": f"doc-{n}"}]}).raise_for_status()
    archive = export_archive(http, bank_id)
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        facts = json.loads(zf.read("manifest.json"))["fact_count"]
    target = f"{bank_id}-parts"
    key = f"banks/{bank_id}/imports/{uuid.uuid4()}/transfer.zip"

    async def submit() -> str:
        parts = await store_in_parts(pg_dsn, key, bank_id, archive, 700)
        assert parts > 3, parts
        conn = await asyncpg.connect(pg_dsn)
        try:
            await _init_connection(conn)  # the server's JSON codecs
            op_id, _ = await ops.enqueue(conn, bank_id, "bank_import", {
                "storage_key": key, "target_bank_id": target, "mode": "restore", "document_conflict": "skip",
                "include_data": True, "include_bank_config": True})
            return str(op_id)
        finally:
            await conn.close()

    status = finish_operation(http, bank_id, asyncio.run(submit()))
    assert status["status"] == "completed", status
    assert status["result_metadata"]["facts_imported"] == facts >= 3

    def stored_texts(bank: str) -> list[str]:
        items = http.get(f"/v1/default/banks/{bank}/memories/list", params={"limit": 100}).json()["items"]
        return sorted(item["text"] for item in items)

    assert stored_texts(target) == stored_texts(bank_id)
    assert http.get(f"/v1/default/files/download/{key}").status_code == 404, "an imported upload is dropped"


async def test_files_stored_whole_before_the_migration_move_into_parts(pg_dsn: str) -> None:
    data = os.urandom(3_000)
    with separate_database(pg_dsn) as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await migrate_before(conn, 30)
            await conn.execute(
                "INSERT INTO stored_files (key, bank_id, media_type, filename, byte_size, data)"
                " VALUES ('banks/old/exports/1/transfer.zip', 'old', 'application/zip', 'old.zip', $1, $2)",
                len(data), data)
            assert "030_stored_file_parts.sql" in await apply_migrations(conn)

            assert await files.read(conn, "banks/old/exports/1/transfer.zip") == data
            kept = await files.info(conn, "banks/old/exports/1/transfer.zip")
            assert kept is not None and (kept["byte_size"], kept["filename"]) == (3_000, "old.zip")
            await files.delete(conn, "banks/old/exports/1/transfer.zip")
            assert await conn.fetchval("SELECT count(*) FROM stored_file_parts") == 0, "parts go with their file"
        finally:
            await conn.close()
