"""Liveness, readiness and version."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends

from engram import __version__
from engram.api.deps import services
from engram.services import Services

router = APIRouter(tags=["Monitoring"])
STARTED = time.monotonic()


@router.get("/health")
async def health(svc: Services = Depends(services)) -> dict[str, object]:
    try:
        await svc.pool.fetchval("SELECT 1")
        database = "connected"
    except Exception as exc:  # report, don't raise: health must answer
        database = f"error: {exc}"
    return {"status": "healthy" if database == "connected" else "unhealthy", "database": database}


@router.get("/health/live")
async def live() -> dict[str, object]:
    return {"status": "alive", "version": __version__, "uptime_seconds": round(time.monotonic() - STARTED, 3)}


@router.get("/health/ready")
async def ready(svc: Services = Depends(services)) -> dict[str, object]:
    await svc.pool.fetchval("SELECT 1")
    return {"status": "ready"}


@router.get("/version")
async def version(svc: Services = Depends(services)) -> dict[str, object]:
    return {
        "api_version": __version__,
        "features": {
            "observations": svc.llm is not None,
            "mcp": True,
            "worker": svc.settings.worker_enabled,
            "bank_config_api": True,
            "bank_llm_health": False,
            "file_upload_api": False,
            "document_export_api": False,
            "document_import_api": False,
            "audit_log": False,
            "llm_trace": False,
            "store_document_text": True,
        },
    }
