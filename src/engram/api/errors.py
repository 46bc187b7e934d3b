"""Maps Engram's errors to HTTP answers: the status of the error class and a message naming what to fix."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
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
