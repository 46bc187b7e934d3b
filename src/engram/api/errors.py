"""Maps Engram's errors to HTTP answers: the status of the error class and a message naming what to fix."""

from __future__ import annotations

import logging

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from engram.errors import EngramError, InvalidInput
from engram.store.pool import UNAVAILABLE, is_unavailable

log = logging.getLogger("engram.api")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EngramError)
    async def engram_error(_: Request, exc: EngramError) -> JSONResponse:
        if exc.status >= 500:
            log.warning("%s: %s", type(exc).__name__, exc.message)
        body: dict[str, object] = {"detail": exc.message, "error": type(exc).__name__}
        if isinstance(exc, InvalidInput):
            body["field"] = exc.field
        return JSONResponse(status_code=exc.status, content=body)

    @app.exception_handler(asyncpg.DataError)
    async def data_error(_: Request, exc: asyncpg.DataError) -> JSONResponse:
        # PostgreSQL's "data exception" class (and asyncpg's check of arguments): a value from the
        # request that the database cannot take, e.g. a number beyond its column's range.
        log.warning("refused a value the database cannot store: %s", exc)
        return JSONResponse(status_code=400, content={"detail": f"invalid value: {exc}", "error": "InvalidInput"})

    async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        # The database is restarting or out of reach: a 503 tells clients to retry.
        if not is_unavailable(exc):
            return await unexpected_error(request, exc)
        log.warning("the database is unavailable: %s: %s", type(exc).__name__, exc)
        detail = f"the database is unavailable ({type(exc).__name__}: {exc}); retry when it is back"
        return JSONResponse(status_code=503, content={"detail": detail, "error": "StoreUnavailable"})

    for error_class in (*UNAVAILABLE, OSError):
        app.add_exception_handler(error_class, database_unavailable)

    @app.exception_handler(Exception)
    async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}: {exc}"})
