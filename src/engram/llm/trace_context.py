"""Which bank and operation the current LLM calls serve, for LLM traces. The worker sets it around
each operation; `TraceContext` sets it around each HTTP request (bank from the path, operation from
the route), so a call made deep inside retain, consolidation or reflect is attributed without
threading the bank through every signature."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from engram.api.alias_resolution import _path_bank
from engram.api.auth import BANKS_PREFIX, ASGIApp, Receive, Scope, Send


@dataclass(frozen=True)
class LLMCallContext:
    bank_id: str | None = None
    operation: str | None = None
    operation_id: str | None = None


CURRENT: contextvars.ContextVar[LLMCallContext | None] = contextvars.ContextVar("engram_llm_call", default=None)


def current() -> LLMCallContext:
    return CURRENT.get() or LLMCallContext()

# Route endpoints whose LLM calls belong to a named operation (the rest use the endpoint's own name).
ENDPOINT_OPERATIONS = {"retain": "retain", "reflect_endpoint": "reflect", "bank_llm_health": "llm_health",
                       "dry_run_refresh": "refresh_mental_model", "dry_run_extract": "retain"}


def use(bank_id: str | None, operation: str | None, operation_id: Any = None) -> contextvars.Token:
    return CURRENT.set(LLMCallContext(bank_id, operation, str(operation_id) if operation_id else None))


class TraceContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(BANKS_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        from engram.audit.middleware import route_of

        found = _path_bank(scope["path"])
        name = getattr(getattr(route_of(scope), "endpoint", None), "__name__", None)
        token = use(found[1] if found else None, ENDPOINT_OPERATIONS.get(name or "", name))
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT.reset(token)
