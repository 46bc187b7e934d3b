"""Bank aliases, resolved once for every route: an ASGI middleware that rewrites a bank id which is
an alias into the bank's own id in the path (`/v1/default/banks/{id}/…`, `/mcp/{id}/`) and in the
MCP `X-Bank-Id` header, before API keys are checked and before routing. Every handler, the MCP
endpoints and the control plane's API calls then see the real bank, and a key's bank patterns are
matched against the bank itself: an alias can never reach further than the bank id would.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from engram import bank_prefetch
from engram.api.auth import BANKS_PREFIX, MCP_PREFIX, ASGIApp, Receive, Scope, Send
from engram.bank_prefetch import PrefetchedBank
from engram.store import aliases as store

log = logging.getLogger("engram.api")
BANK_HEADER = b"x-bank-id"
ALIAS_STATE_KEY = "engram.bank_alias"  # the alias the caller used, for whoever wants to know


def _path_bank(path: str) -> tuple[str, str, str] | None:
    """(prefix, bank segment, rest) when the path names a bank."""
    for prefix in (BANKS_PREFIX, MCP_PREFIX):
        if path.startswith(prefix + "/"):
            segment, slash, rest = path[len(prefix) + 1 :].partition("/")
            if segment:
                return prefix, segment, slash + rest
    return None


# The routes (after the bank's segment) whose handlers read the bank's settings first (recall and
# retain): their lookup reads the bank's row too, for the handler to take (`engram.bank_prefetch`).
PREFETCHING = frozenset({("POST", "/memories"), ("POST", "/memories/recall")})


async def _lookup(scope: Scope, name: str, with_bank: bool = False) -> tuple[str | None, PrefetchedBank | None]:
    """(the bank `name` is an alias of, or None; with `with_bank`, the bank's row read in the same round
    trip). (None, None) when the database cannot answer: the handler answers that itself (a 503)."""
    services = getattr(getattr(scope.get("app"), "state", None), "services", None)
    if services is None:
        return None, None
    try:
        if not with_bank:
            return await store.resolve(services.pool, name), None
        alias_of, found, config = await store.resolve_with_config(services.pool, name)
    except Exception:  # the database is down: unresolved
        log.debug("alias lookup for %r failed", name, exc_info=True)
        return None, None
    return alias_of, PrefetchedBank(alias_of or name, found, config)


def _remember(scope: Scope, alias: str) -> None:
    scope.setdefault("state", {})[ALIAS_STATE_KEY] = alias


async def resolve_scope(scope: Scope) -> PrefetchedBank | None:
    """Rewrite the scope's bank id in place when it is an alias; for a recall or a retain, return the
    bank's row as well."""
    found = _path_bank(scope["path"])
    if found is not None:
        prefix, segment, rest = found
        wanted = prefix == BANKS_PREFIX and (scope.get("method"), rest) in PREFETCHING
        bank_id, prefetched = await _lookup(scope, segment, with_bank=wanted)
        if bank_id is not None:
            scope["path"] = f"{prefix}/{bank_id}{rest}"
            scope["raw_path"] = quote(scope["path"]).encode("ascii")
            _remember(scope, segment)
        return prefetched
    if scope["path"] in (MCP_PREFIX, MCP_PREFIX + "/"):
        headers: list[Any] = list(scope.get("headers") or [])
        for index, (key, value) in enumerate(headers):
            if key == BANK_HEADER and value.strip():
                alias = value.decode("latin-1").strip()
                bank_id, _ = await _lookup(scope, alias)
                if bank_id is not None:
                    headers[index] = (key, bank_id.encode("latin-1"))
                    scope["headers"] = headers
                    _remember(scope, alias)
                return None
    return None


class BankAliasResolution:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefetched = await resolve_scope(scope) if scope["type"] in ("http", "websocket") else None
        token = bank_prefetch.offer(prefetched) if prefetched is not None else None
        try:
            await self.app(scope, receive, send)
        finally:
            if token is not None:
                bank_prefetch.withdraw(token)
