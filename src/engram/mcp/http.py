"""The MCP server over streamable HTTP, as routes of the API app: `/mcp` serves every bank (tools take
`bank_id`, unless an `X-Bank-Id` header names one), `/mcp/{bank_id}/` serves one bank.

Stateless and answering in plain JSON: any server process (or replica) can take any request, and no
session outlives it. The MCP SDK is loaded and its session manager started on the first MCP request,
so a server nobody talks MCP to starts as fast as before; the manager's task group lives in the app's
lifespan (this router's, which FastAPI merges into the app's) and ends with it."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import APIRouter
from starlette.routing import Route

from engram.mcp import BANK_SCOPE_KEY

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

BANK_HEADER = b"x-bank-id"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return None


def token_accepted(scope: Scope, token: str | None) -> bool:
    if not token:
        return True
    scheme, _, given = (_header(scope, b"authorization") or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def _answer(send: Send, status: int, detail: str, extra_headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpEndpoint:
    """The ASGI app behind the MCP routes. The services (and the token setting) are the app's, read
    per request from `app.state.services`."""

    def __init__(self) -> None:
        self._task_group: anyio.abc.TaskGroup | None = None
        self._manager: Any = None
        self._starting = anyio.Lock()

    @asynccontextmanager
    async def running(self, _app: Any = None) -> AsyncIterator[None]:
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            try:
                yield
            finally:
                self._task_group = None
                self._manager = None
                task_group.cancel_scope.cancel()

    async def _session_manager(self, app: Any) -> Any:
        if self._manager is not None:
            return self._manager
        async with self._starting:
            if self._manager is None:
                if self._task_group is None:
                    raise RuntimeError("the MCP endpoint runs inside the app's lifespan, which has not started")
                # The SDK takes ~0.5 s to import: off the event loop, once.
                manager_class, build_server = await asyncio.to_thread(_load_sdk)
                manager = manager_class(
                    app=build_server(lambda: app.state.services), stateless=True, json_response=True,
                    max_request_body_size=app.state.services.settings.max_request_bytes,
                )
                await self._task_group.start(_run_manager, manager)
                self._manager = manager
        return self._manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = scope["app"]
        services = getattr(app.state, "services", None)
        if services is None:
            await _answer(send, 503, "the server is starting")
            return
        if not token_accepted(scope, services.settings.mcp_token):
            await _answer(send, 401, "missing or wrong MCP token: send 'Authorization: Bearer <ENGRAM_MCP_TOKEN>'",
                          ((b"www-authenticate", b"Bearer"),))
            return
        if scope["method"] == "GET":  # a stateless server has nothing to push on a standalone event stream
            await _answer(send, 405, "POST MCP messages here; this endpoint opens no event stream",
                          ((b"allow", b"POST"),))
            return
        bank_id = (scope.get("path_params") or {}).get("bank_id") or _header(scope, BANK_HEADER) or None
        scope[BANK_SCOPE_KEY] = bank_id.strip() if bank_id else None
        manager = await self._session_manager(app)
        await manager.handle_request(scope, receive, send)


def _load_sdk() -> tuple[type, Callable[..., Any]]:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from engram.mcp.server import build_server

    sdk_log = logging.getLogger("mcp")
    if sdk_log.level == logging.NOTSET:  # it reports every stateless request at INFO
        sdk_log.setLevel(logging.WARNING)
    return StreamableHTTPSessionManager, build_server


async def _run_manager(manager: Any, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


def mcp_router() -> APIRouter:
    """The MCP routes with their lifespan; `app.include_router(mcp_router())` mounts them."""
    endpoint = McpEndpoint()
    router = APIRouter(lifespan=endpoint.running)
    for path in ("/mcp", "/mcp/", "/mcp/{bank_id}", "/mcp/{bank_id}/"):
        router.routes.append(Route(path, endpoint, include_in_schema=False))
    return router
