"""Maps Engram's errors to HTTP answers: the status of the error class and a message naming what to fix."""

from __future__ import annotations

import logging

import asyncpg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engram.errors import EngramError, InvalidInput
from engram.store.pool import UNAVAILABLE, is_unavailable

log = logging.getLogger("engram.api")


def field_of(loc: list | tuple) -> str:
    """A validation error's location as a field path: `("body", "items", 0, "tags")` is
    `items[0].tags`, `("query", "limit")` is `limit`; the body as a whole is `body`."""
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header", "cookie") else list(loc)
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]" if path else "body"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EngramError)
    async def engram_error(_: Request, exc: EngramError) -> JSONResponse:
        if exc.status >= 500:
            log.warning("%s: %s", type(exc).__name__, exc.message)
        body: dict[str, object] = {"detail": exc.message, "error": type(exc).__name__}
        if isinstance(exc, InvalidInput):
            body["field"] = exc.field
        return JSONResponse(status_code=exc.status, content=body)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's 422 (Hindsight's answer too, so its shape stays), plus the field of the first
        # error, as every other refusal names it.
        errors = jsonable_encoder(exc.errors())
        field = field_of(errors[0].get("loc", ())) if errors else "body"
        return JSONResponse(status_code=422, content={"detail": errors, "error": "InvalidInput", "field": field})

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
