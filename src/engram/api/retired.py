"""Operations Hindsight 1.1.0 retired: the bank profile and entity regeneration answer 410 Gone with
1.1.0's explanation of what replaced them; the deprecated `/background` is still served, folding the
text into the bank's `reflect_mission`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr

from engram.api.deps import require_bank, services
from engram.errors import BankNotFound
from engram.services import Services
from engram.store import banks as bank_store

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Banks"])

PROFILE_GONE = (
    "The bank profile endpoints have been removed. Disposition traits and the reflect mission are bank "
    "configuration: read them from GET /v1/default/banks/{bank_id}/config as `disposition_skepticism`, "
    "`disposition_literalism`, `disposition_empathy` and `reflect_mission`, and write them with "
    "PATCH /v1/default/banks/{bank_id}/config. The `name` field this endpoint also returned was a "
    "display-only label; read it from GET /v1/default/banks."
)
REGENERATE_GONE = "This endpoint is deprecated. Entity observations are no longer supported."


def _gone(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=410)


@router.get("/profile", deprecated=True)
async def get_bank_profile(bank_id: str) -> JSONResponse:
    return _gone(PROFILE_GONE)


@router.put("/profile", deprecated=True)
async def update_bank_disposition(bank_id: str) -> JSONResponse:
    return _gone(PROFILE_GONE)


@router.post("/entities/{entity_id}/regenerate", deprecated=True, tags=["Entities"])
async def regenerate_entity_observations(bank_id: str, entity_id: str) -> JSONResponse:
    return _gone(REGENERATE_GONE)


class AddBackgroundRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: StrictStr
    update_disposition: StrictBool = True  # accepted for compatibility; Engram never rewrites disposition


@router.post("/background", deprecated=True)
async def add_bank_background(bank_id: str, body: AddBackgroundRequest,
                              svc: Services = Depends(services)) -> dict[str, Any]:
    """Append `content` to the bank's reflect mission (its current mission when it has none)."""
    await require_bank(svc, bank_id)
    async with svc.pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT mission, config FROM banks WHERE bank_id = $1 FOR UPDATE", bank_id)
        if row is None:  # deleted since `require_bank` looked
            raise BankNotFound(bank_id)
        overrides = dict(row["config"] or {})
        current = (overrides.get("reflect_mission") or row["mission"] or "").strip()
        addition = body.content.strip()
        merged = f"{current}\n{addition}" if current and addition else current or addition
        overrides["reflect_mission"] = merged
        await bank_store.set_config_overrides(conn, bank_id, overrides)
    return {"mission": merged, "background": merged, "disposition": None}
