"""Content blocks through the real server: images and files kept in PostgreSQL with the chunk they
appeared in, listed on the document and its chunks, returned byte for byte; the text around them
retained; replaced with the document, kept by a reprocess; bad blocks refused naming the field."""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib

import httpx

from tests.support.waiting import settle, wait_for


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG image (RGB, a few pixels)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([200, 30, 30] * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n\x00\xff binary tail"


def block(kind: str, media_type: str, data: bytes, **extra: str) -> dict:
    return {"type": kind, "source": {"type": "base64", "media_type": media_type,
                                     "data": base64.b64encode(data).decode()}, **extra}


def retain(http: httpx.Client, bank_id: str, content: list[dict], **item: object) -> httpx.Response:
    return http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": content, **item}]})


def test_image_and_file_blocks_round_trip_byte_identical(http: httpx.Client, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"retain_chunk_size": 50}}).raise_for_status()
    image = png()
    first, second = "First we open the panel on the left side.", "Then connect red to the pin on the left."
    content = [{"type": "text", "text": first}, block("image", "image/png", image), {"type": "text", "text": second},
               block("file", "application/pdf", PDF, filename="manual.pdf")]
    answer = retain(http, bank_id, content, document_id="wiring")
    assert answer.status_code == 200, answer.text

    texts = [f["text"] for f in http.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]]
    assert any("open the panel" in t for t in texts) and any("connect red" in t for t in texts)
    document = http.get(f"/v1/default/banks/{bank_id}/documents/wiring").json()
    listed = document["attachments"]
    assert [(a["kind"], a["media_type"], a["byte_size"]) for a in listed] == [
        ("image", "image/png", len(image)), ("file", "application/pdf", len(PDF))]
    assert listed[0]["hash"] == hashlib.sha256(image).hexdigest() and listed[1]["filename"] == "manual.pdf"
    for attachment, original in zip(listed, (image, PDF)):
        got = http.get(attachment["url"])
        assert got.status_code == 200 and got.content == original
        assert got.headers["content-type"] == attachment["media_type"]

    chunks = http.get(f"/v1/default/banks/{bank_id}/documents/wiring/chunks").json()["items"]
    assert [c["chunk_text"] for c in chunks] == [first, second]
    assert [[a["kind"] for a in c["attachments"]] for c in chunks] == [["image"], ["file"]], \
        "each attachment belongs to the chunk it appeared in"
    one = http.get(f"/v1/default/chunks/{chunks[0]['chunk_id']}").json()
    assert one["attachments"][0]["id"] == listed[0]["id"]

    operation = http.post(f"/v1/default/banks/{bank_id}/documents/wiring/reprocess").json()["operation_id"]
    wait_for(lambda: http.get(f"/v1/default/banks/{bank_id}/operations/{operation}").json()["status"] == "completed",
             "the reprocess")
    chunks = http.get(f"/v1/default/banks/{bank_id}/documents/wiring/chunks").json()["items"]
    assert [[a["id"] for a in c["attachments"]] for c in chunks] == [[listed[0]["id"]], [listed[1]["id"]]], \
        "a reprocess keeps the attachments and finds their chunks again"

    retain(http, bank_id, [{"type": "text", "text": "The panel was replaced."}], document_id="wiring")
    assert http.get(f"/v1/default/banks/{bank_id}/documents/wiring").json()["attachments"] == []
    assert http.get(listed[0]["url"]).status_code == 404


def test_image_only_content_is_kept_without_facts(http: httpx.Client, bank_id: str) -> None:
    answer = retain(http, bank_id, [block("image", "image/png", png(1, 1))], document_id="photo")
    assert answer.status_code == 200, answer.text
    document = http.get(f"/v1/default/banks/{bank_id}/documents/photo").json()
    assert document["memory_unit_count"] == 0 and len(document["attachments"]) == 1
    assert http.get(document["attachments"][0]["url"]).content == png(1, 1)


def test_async_retain_keeps_attachments_too(http: httpx.Client, bank_id: str) -> None:
    answer = http.post(f"/v1/default/banks/{bank_id}/memories", json={"async": True, "items": [
        {"content": [{"type": "text", "text": "Photo of the new office."}, block("image", "image/png", png(2, 2))],
         "document_id": "office"}]})
    assert answer.status_code == 200, answer.text
    settle(http, bank_id)
    (attachment,) = http.get(f"/v1/default/banks/{bank_id}/documents/office").json()["attachments"]
    assert http.get(attachment["url"]).content == png(2, 2)


def test_bad_blocks_are_refused_naming_the_field(http: httpx.Client, bank_id: str) -> None:
    cases = [
        ([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%%"}}],
         "items[0].content[0].source.data"),
        ([{"type": "image", "source": {"type": "base64", "media_type": "png", "data": "AAAA"}}],
         "items[0].content[0].source.media_type"),
        ([{"type": "text", "text": "hi"}, {"type": "image"}], "items[0].content[1].source"),
        ([{"type": "audio", "source": {}}], "items[0].content[0].type"),
        ([{"type": "image", "source": {"type": "url", "media_type": "image/png", "data": "x"}}],
         "items[0].content[0].source.type"),
    ]
    for content, field in cases:
        answer = retain(http, bank_id, content)
        assert answer.status_code == 400 and answer.json()["field"] == field, (content, answer.text)
    assert http.get(f"/v1/default/banks/{bank_id}/attachments/not-a-uuid").status_code == 404
