"""Maps Engram's errors to HTTP answers: the status of the error class and a message naming what to fix."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engram.errors import EngramError, InvalidInput
from engram.store.pool import UNAVAILABLE, is_unavailable

log = logging.getLogger("engram.api")

# Seconds a client should wait before retrying a 503: about what a restart of PostgreSQL takes.
RETRY_AFTER = "5"


def database_unavailable_response(exc: BaseException) -> JSONResponse:
    log.warning("the database is unavailable: %s: %s", type(exc).__name__, exc)
    detail = f"the database is unavailable ({type(exc).__name__}: {exc}); retry when it is back"
    return JSONResponse(status_code=503, content={"detail": detail, "error": "StoreUnavailable"},
                        headers={"Retry-After": RETRY_AFTER})


def unexpected_error_response(exc: BaseException) -> JSONResponse:
    """The answer to an error nothing else handled: a 503 when it says the database is gone, else a 500."""
    if is_unavailable(exc):
        return database_unavailable_response(exc)
    log.error("unhandled error", exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}: {exc}",
                                                  "error": "InternalError"})


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
        headers = {"Retry-After": RETRY_AFTER} if exc.status == 503 else None
        return JSONResponse(status_code=exc.status, content=body, headers=headers)

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

    async def connection_error(_: Request, exc: Exception) -> JSONResponse:
        # The database is restarting or out of reach (a 503 tells clients to retry), or not: a 500.
        return unexpected_error_response(exc)

    for error_class in (*UNAVAILABLE, asyncpg.InterfaceError, OSError):
        app.add_exception_handler(error_class, connection_error)


class UnexpectedErrors:
    """The outermost ASGI layer: any exception no handler took becomes a JSON 500 (or 503) here.

    Starlette's own last-resort handler answers and then re-raises, and uvicorn closes the connection
    on any exception that leaves the application, so the client's next request on that keep-alive
    connection was reset. Answered here, the exception goes no further and the connection stays open.
    Only an exception after the answer has begun still reaches the server: half an answer cannot be
    completed, and closing the connection is the only honest end to it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                raise
            await unexpected_error_response(exc)(scope, receive, send)
