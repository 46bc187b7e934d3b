"""The control plane: a browser UI over the same HTTP API, served as static files at `/ui`.

The pages are plain HTML, CSS and ES modules (no build step, nothing fetched from a CDN); they call
`/v1/default/...` on the same origin, so whatever guards the API (API keys) guards what they show.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
PREFIX = "/ui"


class _UiFiles(StaticFiles):
    """Static files that the browser revalidates on every load (ETag), so an upgraded server never
    serves a page with a stale module beside it."""

    def file_response(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - Starlette's signature
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "no-cache"
        return response


def mount(app: FastAPI) -> None:
    """Serve the UI at `/ui/` (and redirect `/` and `/ui` there, so relative module paths resolve)."""

    @app.get("/", include_in_schema=False)
    async def site_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/")

    @app.get(PREFIX, include_in_schema=False)
    async def ui_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/")

    app.mount(PREFIX, _UiFiles(directory=STATIC_DIR, html=True), name="ui")
