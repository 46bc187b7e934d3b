"""No request waits on the thread pool for its dependencies: FastAPI runs a plain-function dependency
(or endpoint) on a worker thread, a hand-off there and back on every request. Reading the app's
services that way cost ~0.15 ms of the server's CPU on each request (`bench/README.md`, session 20)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from engram.api.app import create_app


def api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every API route, through included routers (kept whole by this FastAPI as `original_router`)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None) or getattr(route, "app", None)
        if inner is not None and hasattr(inner, "routes"):
            yield from api_routes(inner.routes)


def plain_functions(dependant: Dependant) -> Iterator[str]:
    for dependency in dependant.dependencies:
        call = dependency.call
        if call is not None and not inspect.iscoroutinefunction(call):
            yield getattr(call, "__qualname__", repr(call))
        yield from plain_functions(dependency)


def test_every_endpoint_and_dependency_is_a_coroutine() -> None:
    routes = list(api_routes(create_app().routes))
    assert len({(route.path, tuple(sorted(route.methods))) for route in routes}) >= 100, \
        "every operation's route was found"
    on_threads = {f"{route.path}: {name}" for route in routes for name in plain_functions(route.dependant)}
    on_threads |= {f"{route.path}: {route.endpoint.__qualname__}" for route in routes
                   if not inspect.iscoroutinefunction(route.endpoint)}
    assert not on_threads
