"""`/metrics` in Prometheus text format, and the middleware that times every request by route."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from engram.api.deps import services
from engram.heap import collector_metrics
from engram.metrics import REGISTRY
from engram.services import Services

router = APIRouter(tags=["Monitoring"])


class RequestTiming:
    """Pure ASGI middleware: latency per route template (not per raw path, which would explode)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            REGISTRY.observe_request(scope["method"], template, status["code"], time.perf_counter() - started)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(svc: Services = Depends(services)) -> str:
    rows = await svc.pool.fetch(
        "SELECT operation_type, status, count(*) AS n FROM async_operations GROUP BY 1, 2 ORDER BY 1, 2"
    )
    lines = ["# HELP engram_operations Operations in the queue by type and status", "# TYPE engram_operations gauge"]
    lines += [f'engram_operations{{type="{r["operation_type"]}",status="{r["status"]}"}} {r["n"]}' for r in rows]
    return REGISTRY.render(lines + collector_metrics())
