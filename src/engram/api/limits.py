"""Request limits checked before any handler runs: the body's size (413) and read time (408), and a
JSON body's encoding, nesting, numbers and characters PostgreSQL text cannot hold (`json_body`) —
refused with a 400 naming the field, rather than failing deep inside a handler or a query."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, NoReturn
from urllib.parse import parse_qsl

from engram.api import json_body
from engram.api.auth import ASGIApp, Receive, Scope, Send
from engram.api.json_body import unstorable

__all__ = ["DEFAULT_BODY_READ_TIMEOUT", "DEFAULT_MAX_REQUEST_BYTES", "RequestLimits", "unstorable"]

DEFAULT_MAX_REQUEST_BYTES = 10 * 1024 * 1024
DEFAULT_BODY_READ_TIMEOUT = 30.0
# Bodies larger than this are checked on a worker thread, so a big one does not hold the event loop.
_CHECK_INLINE_BYTES = 64 * 1024
# Uploads (files to retain, transfer archives) may be larger, by default as in Hindsight: up to 100 MB
# (ENGRAM_MAX_UPLOAD_BYTES; a 100,000-memory bank's archive is ~200 MB).
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
UPLOAD_PATH_SUFFIXES = ("/files/retain", "/transfer/import", "/document-transfer")


def _path_problem(path: str) -> tuple[str, str] | None:
    reason = unstorable(path)
    if reason is None:
        return None
    segments = path.split("/")
    in_bank_id = segments[1:4] == ["v1", "default", "banks"] and len(segments) > 4 and "\x00" in segments[4]
    return ("bank_id" if in_bank_id else "path"), reason


def _query_problem(query_string: bytes) -> tuple[str, str] | None:
    if b"%00" not in query_string and b"\x00" not in query_string:
        return None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        reason = unstorable(name) or unstorable(value)
        if reason:
            return name, reason
    return None


def _is_json(scope: Scope) -> bool:
    """Whether the handler will parse the body as JSON: FastAPI does for `application/json`,
    `application/*+json`, and when no content type is given."""
    content_type = _header(scope, b"content-type")
    if content_type is None:
        return True
    media = content_type.split(b";")[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


async def _body_problem(scope: Scope, body: bytes) -> tuple[str, str] | None:
    if not body or not _is_json(scope):
        return None
    if len(body) <= _CHECK_INLINE_BYTES:
        return json_body.check(body)
    return await asyncio.to_thread(json_body.check, body)


class RequestLimits:
    """Buffers the body up to `max_body_bytes` (FastAPI reads it whole anyway) and checks it. The
    whole body must arrive within `body_read_timeout` seconds: a client that declares more than it
    sends (or trickles it) gets a 408 and the connection is closed, instead of holding it forever
    (uvicorn's keep-alive timeout only covers idle connections between requests)."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT, max_upload_bytes: int = MAX_UPLOAD_BYTES,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_read_timeout = body_read_timeout
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _path_problem(scope["path"]) or _query_problem(scope.get("query_string", b""))
        if problem:
            await _answer(send, 400, "InvalidInput", *problem)
            return
        limit = self.max_body_bytes
        if scope["path"].endswith(UPLOAD_PATH_SUFFIXES):
            limit = max(limit, self.max_upload_bytes)
        if _declared_length(scope) > limit:
            await self.answer_too_large(send, limit)
            return
        if not _is_json(scope):
            await self._pass_streamed(scope, receive, send, limit)
            return
        body = await self._read_body(scope, receive, send, limit)
        if body is None:
            return
        problem = await _body_problem(scope, body)
        if problem:
            await _answer(send, 400, "InvalidInput", *problem)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send, limit: int) -> bytes | None:
        """The whole body, or None when the request was answered (413, 408) or the client left."""
        body = _MeteredBody(self, scope, receive, send, limit)
        chunks: list[bytes] = []
        while True:
            try:
                message = await body.receive()
            except _Answered:
                return None
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _pass_streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """A body the handler parses itself (a multipart upload) passed on as it arrives, under the same
        size limit and read deadline. Buffered, a 200 MB archive was held twice and handed to the
        multipart parser in one piece, which held the event loop for ~2 s (every other request waited)."""
        body = _MeteredBody(self, scope, receive, send, limit)
        try:
            await self.app(scope, body.receive, body.send)
        except Exception:
            if not body.answered:  # the handler's own failure: the error middleware answers it
                raise
            # Refused here (413, 408) while the handler read: whatever it made of that is moot.

    async def answer_too_large(self, send: Send, limit: int) -> None:
        uploads = limit == self.max_upload_bytes
        setting = "for uploads (ENGRAM_MAX_UPLOAD_BYTES)" if uploads else "(ENGRAM_MAX_REQUEST_BYTES)"
        await _answer(send, 413, "PayloadTooLarge", "body", f"larger than the limit of {limit} bytes {setting}")


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers") or []:
        if name == wanted:
            return value
    return None


def _declared_length(scope: Scope) -> int:
    try:
        return int(_header(scope, b"content-length") or 0)
    except ValueError:
        return 0


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            return await receive()  # waits for the client's disconnect, as the server would
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class _Answered(Exception):
    """The body was refused (413, 408) and the answer sent: the reader must stop."""


class _MeteredBody:
    """`receive` for one request's body that counts it against `limit` and the read deadline, and
    answers 413 or 408 itself the moment either is passed (then raises `_Answered`). `send` passes
    the application's answer on, unless the request was refused first."""

    def __init__(self, limits: RequestLimits, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        self._limits, self._scope, self._receive, self._send, self._limit = limits, scope, receive, send, limit
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + limits.body_read_timeout
        self._size = 0
        self._complete = False
        self._started = False  # the application began its answer: a refusal can only end the request
        self.answered = False

    async def receive(self) -> dict[str, Any]:
        if self._complete:  # past the body: waiting for the client's disconnect has no deadline
            return await self._receive()
        try:
            message = await asyncio.wait_for(self._receive(), max(self._deadline - self._loop.time(), 0))
        except TimeoutError:
            declared = _declared_length(self._scope)
            expected = f" of the {declared} declared" if declared else ""
            reason = (f"not received within {self._limits.body_read_timeout:g} s (ENGRAM_BODY_READ_TIMEOUT): "
                      f"got {self._size}{expected} bytes")
            await self._refuse(_answer(self._send, 408, "RequestTimeout", "body", reason, close=True))
        if message["type"] == "http.request":
            self._size += len(message.get("body", b""))
            if self._size > self._limit:
                await self._refuse(self._limits.answer_too_large(self._send, self._limit))
            self._complete = not message.get("more_body", False)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if not self.answered:
            self._started = self._started or message["type"] == "http.response.start"
            await self._send(message)

    async def _refuse(self, answer: Coroutine[Any, Any, None]) -> NoReturn:
        if self._started:
            answer.close()
            raise _Answered
        self.answered = True
        await answer
        raise _Answered


async def _answer(send: Send, status: int, error: str, field: str, reason: str, *, close: bool = False) -> None:
    body = json.dumps({"detail": f"{field}: {reason}", "error": error, "field": field}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the rest of the body may still come: the connection cannot carry another request
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
