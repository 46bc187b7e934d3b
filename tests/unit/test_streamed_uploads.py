"""A body the handler parses itself (a multipart upload: a transfer archive, files to retain) passes
the request limits as it arrives, a message at a time, instead of being buffered whole first: a 200 MB
archive was held twice and handed to the multipart parser in one piece, which held the event loop for
seconds. The size limit (413) and the read deadline (408) still hold midway, answered by the limits
themselves; what the handler makes of the cut-off body is not sent. JSON bodies are still read whole
(they are checked before any handler runs)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engram.api.limits import RequestLimits

MULTIPART = [(b"content-type", b"multipart/form-data; boundary=x")]
JSON = [(b"content-type", b"application/json")]


def scope_of(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "query_string": b"", "headers": headers}


def arriving(*chunks: bytes, then_stall: bool = False) -> Any:
    """A client's body, a message per chunk; with `then_stall` the last chunk never comes."""
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    if then_stall:
        messages = [{**m, "more_body": True} for m in messages[:-1]]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    return receive


class Handler:
    """Reads the body as a handler does, then answers 201; a failure while reading is answered 400
    (FastAPI turns a failed body parse into one)."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        status = 201
        try:
            while True:
                message = await receive()
                self.received.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except Exception:
            status = 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"handled"})


async def answered(limits: RequestLimits, scope: dict[str, Any], receive: Any) -> tuple[int, dict[str, Any], list]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await limits(scope, receive, send)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent  # one answer, never two
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return starts[0]["status"], json.loads(body) if body != b"handled" else {}, starts[0]["headers"]


async def test_an_upload_reaches_its_handler_as_it_arrives() -> None:
    handler = Handler()
    limits = RequestLimits(handler, max_body_bytes=100, max_upload_bytes=1000)
    chunks = [b"a" * 300, b"b" * 300, b"c" * 300]
    status, _, _ = await answered(limits, scope_of("/v1/default/banks/b/transfer/import", MULTIPART), arriving(*chunks))
    assert status == 201
    assert handler.received == chunks  # three messages as they came, not one joined body


async def test_a_json_body_is_still_read_whole_before_its_handler_runs() -> None:
    handler = Handler()
    limits = RequestLimits(handler, max_body_bytes=100)
    status, _, _ = await answered(limits, scope_of("/v1/default/banks/b/memories", JSON), arriving(b'{"a":', b" 1}"))
    assert status == 201
    assert handler.received == [b'{"a": 1}']


async def test_an_upload_past_the_limit_midway_is_413_and_the_handler_stops_there() -> None:
    handler = Handler()
    limits = RequestLimits(handler, max_body_bytes=100, max_upload_bytes=1000)
    receive = arriving(b"a" * 600, b"b" * 600, b"c" * 600)  # no Content-Length: chunked
    status, body, _ = await answered(limits, scope_of("/v1/default/banks/b/transfer/import", MULTIPART), receive)
    assert status == 413, body
    assert body["field"] == "body" and "1000" in body["detail"] and "ENGRAM_MAX_UPLOAD_BYTES" in body["detail"]
    assert handler.received == [b"a" * 600]  # the second chunk was refused, not handed on


async def test_an_upload_past_the_request_limit_elsewhere_is_413_naming_that_setting() -> None:
    handler = Handler()
    limits = RequestLimits(handler, max_body_bytes=100, max_upload_bytes=1000)
    status, body, _ = await answered(limits, scope_of("/v1/default/banks/b/memories", MULTIPART),
                                     arriving(b"a" * 60, b"b" * 60))
    assert status == 413 and "ENGRAM_MAX_REQUEST_BYTES" in body["detail"], body


async def test_an_upload_that_stops_arriving_is_408_and_the_connection_closes() -> None:
    handler = Handler()
    limits = RequestLimits(handler, body_read_timeout=0.2, max_upload_bytes=1000)
    headers = [*MULTIPART, (b"content-length", b"900")]
    receive = arriving(b"a" * 300, b"never", then_stall=True)
    status, body, response_headers = await asyncio.wait_for(
        answered(limits, scope_of("/v1/default/banks/b/transfer/import", headers), receive), 10)
    assert status == 408, body
    assert "got 300 of the 900 declared bytes" in body["detail"] and "ENGRAM_BODY_READ_TIMEOUT" in body["detail"]
    assert (b"connection", b"close") in response_headers
    assert handler.received == [b"a" * 300]
