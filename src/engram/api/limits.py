"""Request limits checked before any handler runs: the body's size (413), and characters PostgreSQL
text cannot hold — NUL and lone UTF-16 surrogates — refused with a 400 naming the field that holds
them, rather than failing deep inside a query."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from engram.api.auth import ASGIApp, Receive, Scope, Send

DEFAULT_MAX_REQUEST_BYTES = 10 * 1024 * 1024
# Uploads (files to retain, transfer archives) may be larger, as in Hindsight: up to 100 MB.
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
UPLOAD_PATH_SUFFIXES = ("/files/retain", "/transfer/import", "/document-transfer")
# JSON escapes that decode to NUL or to a surrogate half; a cheap test before parsing anything.
_SUSPECT_ESCAPE = re.compile(rb"\\u0000|\\u[dD][89a-fA-F]")


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store `text`, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate, which is not valid Unicode"
    return None


def find_unstorable(value: Any) -> tuple[str, str] | None:
    """The first string (object key or value) in a JSON document that cannot be stored, as
    (field path like `items[0].metadata.k`, reason)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            reason = unstorable(node)
            if reason:
                return where or "body", reason
        elif isinstance(node, dict):
            for key, child in reversed(list(node.items())):
                path = f"{where}.{key}" if where else str(key)
                reason = unstorable(key)
                if reason:
                    return path, f"key {reason}"
                stack.append((path, child))
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(node))))
    return None


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


def _body_problem(body: bytes) -> tuple[str, str] | None:
    if not _SUSPECT_ESCAPE.search(body):
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the handler answers that
    return find_unstorable(document)


class RequestLimits:
    """Buffers the body up to `max_body_bytes` (FastAPI reads it whole anyway) and checks it."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

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
            limit = max(limit, MAX_UPLOAD_BYTES)
        if _declared_length(scope) > limit:
            await self._too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = _body_problem(body)
        if problem:
            await _answer(send, 400, "InvalidInput", *problem)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, send: Send, limit: int) -> None:
        setting = "for uploads" if limit == MAX_UPLOAD_BYTES else "(ENGRAM_MAX_REQUEST_BYTES)"
        await _answer(send, 413, "PayloadTooLarge", "body", f"larger than the limit of {limit} bytes {setting}")


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
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


async def _answer(send: Send, status: int, error: str, field: str, reason: str) -> None:
    body = json.dumps({"detail": f"{field}: {reason}", "error": error, "field": field}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
