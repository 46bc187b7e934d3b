"""Liveness, readiness and version. `/health` and `/health/ready` answer 503 (with their body) while
the database does not answer, so a load balancer or orchestrator sees it; `/health/live` answers 200
as long as the process serves HTTP."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from engram import __version__
from engram.api.deps import services
from engram.api.errors import RETRY_AFTER
from engram.services import Services

router = APIRouter(tags=["Monitoring"])
STARTED = time.monotonic()
HINDSIGHT_API_VERSION = "1.1.0"  # the Hindsight HTTP API this server implements
PROBE_TIMEOUT = 5.0  # a database that hangs is as unhealthy as one that is down


async def _database(svc: Services) -> str:
    try:
        await asyncio.wait_for(svc.pool.fetchval("SELECT 1"), PROBE_TIMEOUT)
    except Exception as exc:  # report, don't raise: health must answer
        return f"error: {type(exc).__name__}: {exc}"
    return "connected"


def _answer(ok: bool, body: dict[str, object]) -> JSONResponse:
    return JSONResponse(body, status_code=200 if ok else 503, headers=None if ok else {"Retry-After": RETRY_AFTER})


@router.get("/health")
async def health(svc: Services = Depends(services)) -> JSONResponse:
    database = await _database(svc)
    ok = database == "connected"
    return _answer(ok, {"status": "healthy" if ok else "unhealthy", "database": database})


@router.get("/health/live")
async def live() -> dict[str, object]:
    return {"status": "alive", "version": __version__, "uptime_seconds": round(time.monotonic() - STARTED, 3)}


@router.get("/health/ready")
async def ready(svc: Services = Depends(services)) -> JSONResponse:
    database = await _database(svc)
    ok = database == "connected"
    return _answer(ok, {"status": "ready"} if ok else {"status": "not ready", "database": database})


@router.get("/version")
async def version(svc: Services = Depends(services)) -> dict[str, object]:
    return {
        "api_version": HINDSIGHT_API_VERSION,
        "engram_version": __version__,
        "features": {
            "observations": svc.llm is not None,
            "mcp": True,
            "worker": svc.settings.worker_enabled,
            "bank_config_api": True,
            "bank_llm_health": True,
            "file_upload_api": False,
            "document_export_api": False,
            "document_import_api": False,
            "audit_log": svc.settings.audit_log_enabled,
            "llm_trace": svc.settings.llm_trace_enabled,
            "store_document_text": True,
        },
    }
