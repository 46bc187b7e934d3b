"""Request-scoped access to the app's services, and small parsing helpers shared by routers."""

from __future__ import annotations

import uuid

from fastapi import Request

from engram.errors import BankNotFound, InvalidInput, NotFound
from engram.services import Services


async def services(request: Request) -> Services:
    """The app's services. A coroutine on purpose: FastAPI runs a plain-function dependency on its
    thread pool, a thread hand-off (and back) on every request for one attribute read."""
    return request.app.state.services


async def require_bank(svc: Services, bank_id: str) -> None:
    if await svc.pool.fetchval("SELECT 1 FROM banks WHERE bank_id = $1", bank_id) is None:
        raise BankNotFound(bank_id)


def parse_uuid(value: str, field: str, *, missing_is_404: bool = True) -> uuid.UUID:
    """A path id as UUID; a malformed one cannot exist, so it answers 404 (or 400 for bodies)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        if missing_is_404:
            raise NotFound(f"{field} '{value}' not found") from None
        raise InvalidInput(field, f"not a UUID: {value!r}") from None
