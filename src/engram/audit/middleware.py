"""The audit log middleware. With `ENGRAM_AUDIT_LOG_ENABLED`, every mutating request to the API or
MCP (and with `ENGRAM_AUDIT_LOG_READS` every read too) leaves one row: who (the API key's id, never
the key), the bank, the action (the route's operation, or the MCP method and tool), route, status,
duration and both bodies, bounded and with secrets redacted. It sits between alias resolution and
the key check, so it sees the bank an alias named and also records refused requests. The row is
written before the response's last chunk goes out, so a client that has its answer can already read
the entry (and a retention pass due on that request has run); a failure to write it is logged, never
the request's problem.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.routing import Match

from engram.api.alias_resolution import ALIAS_STATE_KEY, _path_bank
from engram.api.auth import KEY_ID_STATE_KEY, MCP_PREFIX, ASGIApp, Message, Receive, Scope, Send
from engram.audit.redaction import MAX_PARSE_BYTES, kept_body, redact_query

log = logging.getLogger("engram.audit")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AUDITED_PREFIXES = ("/v1/", MCP_PREFIX)
PRUNE_EVERY = 3600.0  # seconds between retention passes in one process


def _transport(path: str) -> str:
    return "mcp" if path == MCP_PREFIX or path.startswith(MCP_PREFIX + "/") else "http"


def _mcp_action(body: dict[str, Any] | None) -> str:
    message = (body or {}).get("body")
    if isinstance(message, dict):
        name = (message.get("params") or {}).get("name") if message.get("method") == "tools/call" else None
        return f"mcp.{name}" if name else f"mcp.{message.get('method') or 'request'}"
    return "mcp.request"


def _mcp_bank(body: dict[str, Any] | None) -> str | None:
    """The `bank_id` argument of an MCP tool call on the multi-bank endpoint."""
    message = (body or {}).get("body")
    params = message.get("params") if isinstance(message, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    bank_id = arguments.get("bank_id") if isinstance(arguments, dict) else None
    return bank_id if isinstance(bank_id, str) else None


def _routes(routes: list[Any]) -> Iterator[Any]:
    for route in routes:
        inner = getattr(route, "original_router", None)  # FastAPI's wrapper of an included router
        yield from _routes(inner.routes) if inner is not None else (route,)


def route_of(scope: Scope) -> Any:
    """The route that handled the request, or that would have, for one refused before routing."""
    if scope.get("route") is not None:
        return scope["route"]
    router = getattr(scope.get("app"), "router", None)
    for route in _routes(getattr(router, "routes", [])):
        try:
            if route.matches(scope)[0] == Match.FULL:
                return route
        except Exception:  # a route type that cannot match this scope
            continue
    return None


class _Capture:
    """The first bytes of a body stream and its total size."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.kept = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.kept <= MAX_PARSE_BYTES:
            self.chunks.append(chunk)
            self.kept += len(chunk)

    def kept_body(self) -> dict[str, Any] | None:
        return kept_body(b"".join(self.chunks), self.total)


class AuditLog:
    def __init__(self, app: ASGIApp, *, enabled: bool, reads: bool, retention_days: int) -> None:
        self.app = app
        self.enabled = enabled
        self.reads = reads
        self.retention_days = retention_days
        self._pruned_at = -math.inf  # 0.0 skipped the first pass on a machine up for under an hour

    def audited(self, scope: Scope) -> bool:
        if not self.enabled or scope["type"] != "http" or not scope["path"].startswith(AUDITED_PREFIXES):
            return False
        if scope["method"] in MUTATING:
            return True
        # Reading the audit log is not itself audited: each page would add to what it lists.
        return self.reads and scope["method"] == "GET" and "/audit-logs" not in scope["path"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.audited(scope):
            await self.app(scope, receive, send)
            return
        request, response, status = _Capture(), _Capture(), {"code": None}

        async def capture_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.add(message.get("body", b""))
            return message

        held: list[Message] = []  # the response's last chunk, sent once the entry is written

        async def capture_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            elif message["type"] == "http.response.body":
                response.add(message.get("body", b""))
                if not message.get("more_body", False):
                    held.append(message)
                    return
            await send(message)

        started_at, started = datetime.now(UTC), time.perf_counter()
        try:
            await self.app(scope, capture_receive, capture_send)
        finally:
            duration = time.perf_counter() - started
            try:
                await self.write(scope, request, response, status["code"] or 500, started_at, duration)
            except Exception:  # the database may be down: the request's answer stands
                log.warning("audit entry for %s %s not written", scope["method"], scope["path"], exc_info=True)
            for message in held:
                await send(message)

    async def write(self, scope: Scope, request: _Capture, response: _Capture, status: int,
                    started_at: datetime, duration: float) -> None:
        services = getattr(getattr(scope.get("app"), "state", None), "services", None)
        if services is None:
            return
        from engram.store import audit as store

        path, state = scope["path"], scope.get("state") or {}
        found = _path_bank(path)
        request_body = request.kept_body()
        matched = route_of(scope)
        route = getattr(matched, "path", None)
        transport = _transport(path)
        endpoint_name = getattr(getattr(matched, "endpoint", None), "__name__", None)
        action = _mcp_action(request_body) if transport == "mcp" else endpoint_name or "unmatched"
        bank_id = found[1] if found else _mcp_bank(request_body) if transport == "mcp" else None
        metadata = {"method": scope["method"], "path": path, "route": route, "status_code": status,
                    "api_key_id": state.get(KEY_ID_STATE_KEY), "query": redact_query(scope.get("query_string",
                    b"").decode("latin-1")), "via_alias": state.get(ALIAS_STATE_KEY)}
        await store.insert(services.pool, {
            "id": uuid.uuid4(), "bank_id": bank_id, "action": action,
            "transport": transport, "api_key_id": state.get(KEY_ID_STATE_KEY), "method": scope["method"],
            "route": route, "path": path, "status_code": status, "started_at": started_at,
            "ended_at": started_at + timedelta(seconds=duration), "duration_ms": round(duration * 1000),
            "request": request_body, "response": response.kept_body(), "metadata": json.loads(json.dumps(metadata)),
        })
        await self.prune(services)

    async def prune(self, services: Any) -> None:
        if self.retention_days < 0 or time.monotonic() - self._pruned_at < PRUNE_EVERY:
            return
        from engram.store import audit as store

        self._pruned_at = time.monotonic()
        await store.prune(services.pool, self.retention_days)
