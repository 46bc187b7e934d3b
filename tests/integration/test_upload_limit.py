"""Uploads (a transfer archive to import, files to retain) may be larger than other requests: 100 MB
by default, as in Hindsight 1.1.0, or `ENGRAM_MAX_UPLOAD_BYTES` (a 100,000-memory bank's archive is
~200 MB; uploads get the larger of it and `ENGRAM_MAX_REQUEST_BYTES`). Past the limit the upload is a
413 naming the setting, before the body is read whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import RunningServer, start_server

LIMIT = 4096


@pytest.fixture(scope="module")
def small_upload_server(pg_dsn: str) -> Iterator[RunningServer]:
    env = {"ENGRAM_MAX_UPLOAD_BYTES": str(LIMIT), "ENGRAM_MAX_REQUEST_BYTES": str(LIMIT // 4)}
    running = start_server(pg_dsn, env, name="small-uploads")
    yield running
    running.stop()


def test_an_archive_past_the_upload_limit_is_413_naming_the_setting(
    small_upload_server: RunningServer, bank_id: str
) -> None:
    with small_upload_server.client() as http:
        path = f"/v1/default/banks/{bank_id}/transfer/import"
        over = http.post(path, files={"file": ("a.zip", b"x" * (LIMIT + 1), "application/zip")})
        assert over.status_code == 413, over.text
        assert over.json()["field"] == "body"
        assert str(LIMIT) in over.json()["detail"] and "ENGRAM_MAX_UPLOAD_BYTES" in over.json()["detail"]

        under = http.post(path, files={"file": ("a.zip", b"x" * (LIMIT // 2), "application/zip")})
        assert under.status_code == 400, under.text  # read and checked: not a ZIP
        assert "not a ZIP" in under.json()["detail"]

        other = http.post(f"/v1/default/banks/{bank_id}/memories", content=b"x" * (LIMIT // 2))
        assert other.status_code == 413 and "ENGRAM_MAX_REQUEST_BYTES" in other.json()["detail"], other.text


def _multipart_chunks(payload: bytes, chunk: int = 1024) -> tuple[str, list[bytes]]:
    """A one-file multipart body in pieces, as a client streams it (chunked: no Content-Length)."""
    head = b'--edge\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\n' \
           b"Content-Type: application/zip\r\n\r\n"
    body = head + payload + b"\r\n--edge--\r\n"
    return "multipart/form-data; boundary=edge", [body[i:i + chunk] for i in range(0, len(body), chunk)]


def test_a_chunked_archive_is_parsed_as_it_arrives_and_refused_413_once_past_the_limit(
    small_upload_server: RunningServer, bank_id: str
) -> None:
    path = f"/v1/default/banks/{bank_id}/transfer/import"
    with small_upload_server.client() as http:
        content_type, chunks = _multipart_chunks(b"x" * (LIMIT // 2))
        under = http.post(path, content=iter(chunks), headers={"content-type": content_type})
        assert under.status_code == 400, under.text  # streamed to the multipart parser whole: not a ZIP
        assert "not a ZIP" in under.json()["detail"]

        content_type, chunks = _multipart_chunks(b"x" * (LIMIT * 3))
        over = http.post(path, content=iter(chunks), headers={"content-type": content_type})
        assert over.status_code == 413, over.text
        assert "ENGRAM_MAX_UPLOAD_BYTES" in over.json()["detail"]
    with small_upload_server.client() as http:
        assert http.get("/health").status_code == 200
