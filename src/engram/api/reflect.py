"""Reflect: answering a question from memory."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from engram.api.deps import services
from engram.api.memories import MAX_QUERY_CHARS
from engram.errors import InvalidInput
from engram.reflect.agent import reflect
from engram.services import Services
from engram.types import ReflectRequest, ReflectResponse

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Memory"])


@router.post("/reflect", response_model=ReflectResponse, response_model_exclude_none=True)
async def reflect_endpoint(bank_id: str, body: ReflectRequest, svc: Services = Depends(services)) -> ReflectResponse:
    if not body.query.strip():
        raise InvalidInput("query", "must not be empty")
    if len(body.query) > MAX_QUERY_CHARS:
        raise InvalidInput("query", f"longer than {MAX_QUERY_CHARS} characters")
    return await reflect(svc, bank_id, body)
