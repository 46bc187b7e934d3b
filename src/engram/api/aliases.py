"""Bank aliases: extra ids that reach a bank (list, add, choose the primary, remove). Every route
accepts an alias wherever it takes a bank id — see `alias_resolution`; by the time these handlers
run, `bank_id` is the bank's own id."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr

from engram.api.auth import bank_access
from engram.api.deps import require_bank, services
from engram.errors import Conflict, EngramError, InvalidInput, NotFound
from engram.services import Services
from engram.store import aliases as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}/aliases", tags=["Banks"])
MAX_ALIAS_CHARS = 200
FORBIDDEN = re.compile(r"[/\x00-\x1f\x7f]")


class Forbidden(EngramError):
    status = 403


class CreateBankAliasRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alias: StrictStr
    primary: StrictBool = False


class SetBankAliasPrimaryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    primary: StrictBool


def validate_alias(alias: str) -> str:
    if not alias.strip():
        raise InvalidInput("alias", "must not be empty")
    if alias != alias.strip():
        raise InvalidInput("alias", "must not start or end with whitespace")
    if len(alias) > MAX_ALIAS_CHARS:
        raise InvalidInput("alias", f"at most {MAX_ALIAS_CHARS} characters")
    if FORBIDDEN.search(alias):
        raise InvalidInput("alias", "must not contain '/' or control characters")
    if alias.startswith("_"):
        raise InvalidInput("alias", "must not start with '_'")
    return alias


async def _answer(svc: Services, bank_id: str) -> dict[str, Any]:
    rows = await store.list_aliases(svc.pool, bank_id)
    return {"bank_id": bank_id, "aliases": [{"alias": r["alias"], "primary": r["is_primary"]} for r in rows]}


@router.get("")
async def list_bank_aliases(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    return await _answer(svc, bank_id)


@router.post("", status_code=201)
async def create_bank_alias(bank_id: str, body: CreateBankAliasRequest, request: Request,
                            svc: Services = Depends(services)) -> dict[str, Any]:
    alias = validate_alias(body.alias)
    await require_bank(svc, bank_id)
    access = bank_access(request)
    if access is not None and not access.allows(alias):
        # Otherwise a key could take over a name that another key's patterns cover.
        raise Forbidden(f"this API key may not use bank '{alias}', so it may not create that alias")
    async with svc.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('bank-alias:' || $1, 0))", alias)
        taken = await store.name_taken(conn, alias)
        if taken:
            raise Conflict(f"'{alias}' is already {'a bank' if taken == 'bank' else 'an alias'}")
        await store.create_alias(conn, bank_id, alias, body.primary)
    return await _answer(svc, bank_id)


@router.patch("/{alias}")
async def set_bank_alias_primary(bank_id: str, alias: str, body: SetBankAliasPrimaryRequest,
                                 svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    async with svc.pool.acquire() as conn, conn.transaction():
        if not await store.set_primary(conn, bank_id, alias, body.primary):
            raise NotFound(f"bank '{bank_id}' has no alias '{alias}'")
    return await _answer(svc, bank_id)


@router.delete("/{alias}")
async def delete_bank_alias(bank_id: str, alias: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    if not await store.delete_alias(svc.pool, bank_id, alias):
        raise NotFound(f"bank '{bank_id}' has no alias '{alias}'")
    return await _answer(svc, bank_id)
