"""Optional API keys. With keys configured, every request but the health checks (and the control
plane's static files) must carry `Authorization: Bearer <key>`; a key limited to some banks reaches
only those banks.

Keys come from `ENGRAM_API_KEYS` — comma-separated, each optionally followed by `:` and the banks it
may use, separated by `|`, with `*` and `?` wildcards: `admin-key,agent-key:agent-*|shared`. Hindsight's
`HINDSIGHT_API_TENANT_API_KEY` (one key, taken verbatim) is accepted too, with access to every bank.

This is a pure ASGI middleware so it guards every route, including apps mounted later (/mcp, /ui).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/", "/health", "/health/live", "/health/ready"})  # "/" only redirects to /ui/
# The control plane's static files (the package's HTML, CSS and JS, no memory data) load without a key:
# a browser cannot send one when it opens a page; the API calls the pages make carry it.
STATIC_UI = "/ui"
BANKS_PREFIX = "/v1/default/banks"
MCP_PREFIX = "/mcp"
# Paths outside any bank that a bank-limited key may still use: the bank list and chunks are
# filtered by their handlers (see `bank_access`), the rest carry no memory data.
CHUNKS_PREFIX = "/v1/default/chunks/"
FILES_PREFIX = "/v1/default/files/download/"  # each stored file belongs to a bank its handler checks
LIMITED_KEY_PATHS = ("/version", "/openapi.json", "/docs", "/redoc", "/ui", "/v1/bank-template-schema",
                     "/v1/bank-config-schema")
STATE_KEY = "engram.bank_access"
KEY_ID_STATE_KEY = "engram.api_key_id"


def bank_pattern_regex(pattern: str) -> str:
    """A bank pattern (`*` any run of characters, `?` one character) as a regular expression that
    Python's `re` and PostgreSQL's `~` read the same way (other characters escaped or literal)."""
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char.isalnum() or char == "_":
            parts.append(char)
        else:
            parts.append("\\" + char)
    return "".join(parts)


@dataclass(frozen=True)
class BankAccess:
    """The banks a request's key may use: glob patterns, as given in the key's allow-list."""

    patterns: tuple[str, ...]

    @property
    def regexes(self) -> list[str]:
        """Anchored, for PostgreSQL's `bank_id ~ ANY(...)` as for Python's `re.match`."""
        return [f"^(?:{bank_pattern_regex(p)})$" for p in self.patterns]

    def allows(self, bank_id: str) -> bool:
        return any(re.fullmatch(bank_pattern_regex(p), bank_id, re.DOTALL) for p in self.patterns)


@dataclass(frozen=True)
class ApiKey:
    secret: str = field(repr=False)
    access: BankAccess | None = None  # None: every bank

    @property
    def key_id(self) -> str:
        """A stable name for the key that does not reveal it (the audit log records this, never the key)."""
        return "key-" + hashlib.sha256(self.secret.encode()).hexdigest()[:12]


def parse_api_keys(spec: str | None, tenant_key: str | None = None) -> list[ApiKey]:
    """Keys from the `ENGRAM_API_KEYS` format, plus Hindsight's single tenant key. A malformed entry
    is an error at start, never a silently weaker setting."""
    keys = []
    for entry in (spec or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        secret, sep, banks = entry.partition(":")
        secret = secret.strip()
        if not secret:
            raise ValueError("ENGRAM_API_KEYS: an entry has an empty key")
        if not sep:
            keys.append(ApiKey(secret))
            continue
        patterns = tuple(p.strip() for p in banks.split("|") if p.strip())
        if not patterns:
            raise ValueError(f"ENGRAM_API_KEYS: key '{secret[:4]}…' has ':' but no banks after it")
        keys.append(ApiKey(secret, BankAccess(patterns)))
    if tenant_key:
        keys.append(ApiKey(tenant_key))
    return keys


def bank_access(request_or_scope: Any) -> BankAccess | None:
    """The bank allow-list of the request's key; None when the key (or the server) has none."""
    scope = getattr(request_or_scope, "scope", request_or_scope)
    return (scope.get("state") or {}).get(STATE_KEY)


def _open(scope: Scope) -> bool:
    path = scope["path"]
    if path in OPEN_PATHS:
        return True
    static = path == STATIC_UI or path.startswith(STATIC_UI + "/")
    return static and scope["type"] == "http" and scope["method"] in ("GET", "HEAD")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return None


def _bearer(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _confined_bank(scope: Scope) -> str | None:
    """The one bank a request can reach, when its path (or, for MCP, the X-Bank-Id header) names one."""
    path = scope["path"]
    if path.startswith(BANKS_PREFIX + "/"):
        return path[len(BANKS_PREFIX) + 1 :].split("/", 1)[0] or None
    if path == MCP_PREFIX or path.startswith(MCP_PREFIX + "/"):
        segment = path[len(MCP_PREFIX) + 1 :].split("/", 1)[0]
        # /mcp/{bank_id}/ serves that bank only; /mcp serves the header's bank, or every bank without one.
        return segment or (_header(scope, b"x-bank-id") or "").strip() or None
    return None


def _refusal(access: BankAccess, scope: Scope) -> str | None:
    """Why a bank-limited key may not make this request, or None when it may."""
    path = scope["path"]
    bank_id = _confined_bank(scope)
    if bank_id is not None:
        return None if access.allows(bank_id) else f"this API key may not use bank '{bank_id}'"
    if path in (BANKS_PREFIX, BANKS_PREFIX + "/") or path.startswith((CHUNKS_PREFIX, FILES_PREFIX)):
        return None
    if path in LIMITED_KEY_PATHS or any(path.startswith(p + "/") for p in LIMITED_KEY_PATHS):
        return None
    return f"this API key is limited to banks {', '.join(access.patterns)}; {path} is not within one bank"


class ApiKeyAuth:
    """401 without a valid key, 403 when a bank-limited key reaches for another bank."""

    def __init__(self, app: ASGIApp, keys: list[ApiKey]) -> None:
        self.app = app
        self.keys = keys

    def _match(self, token: str) -> ApiKey | None:
        found = None
        for key in self.keys:  # compare with every key, in constant time, whatever matches
            if hmac.compare_digest(token.encode("latin-1"), key.secret.encode()):  # the header's own bytes
                found = found or key
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.keys or scope["type"] not in ("http", "websocket") or _open(scope):
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        key = self._match(token) if token else None
        if key is None:
            detail = "invalid API key" if token else "missing API key: send 'Authorization: Bearer <key>'"
            await _deny(scope, send, 401, "Unauthorized", detail)
            return
        scope.setdefault("state", {})[KEY_ID_STATE_KEY] = key.key_id
        if key.access is not None:
            refusal = _refusal(key.access, scope)
            if refusal:
                await _deny(scope, send, 403, "Forbidden", refusal)
                return
            scope.setdefault("state", {})[STATE_KEY] = key.access
        await self.app(scope, receive, send)


async def _deny(scope: Scope, send: Send, status: int, error: str, detail: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
        return
    body = json.dumps({"detail": detail, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
