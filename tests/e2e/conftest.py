"""Browser fixtures: Debian's headless Chromium driven by Playwright's Python package (no browser
download: Playwright is pointed at the system binary). Without Playwright or Chromium the e2e tests
are skipped, saying what to install."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SCREENSHOTS = Path(__file__).parent.parent / "artifacts" / "screenshots"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "/usr/bin/chromium", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = "apt-get install -y chromium chromium-driver && make install-test"


def chromium_path() -> str | None:
    configured = os.environ.get("ENGRAM_E2E_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    for candidate in CHROMIUM_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


# Module scope, not session: while Playwright's sync API is open it keeps an event loop marked as
# running on the test thread, so asyncio.run and async tests elsewhere must not run meanwhile.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"e2e: the playwright package is not installed ({INSTALL_HINT})")
    executable = chromium_path()
    if executable is None:
        pytest.skip(f"e2e: no Chromium found ({INSTALL_HINT})")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


class BrowserPage:
    """One page of a fresh browser context on a server, with the UI's JavaScript errors collected
    (a test fails on any) and screenshots saved under tests/artifacts/screenshots/."""

    def __init__(self, context: Any, base_url: str) -> None:
        self.context = context
        self.base_url = base_url
        self.page = context.new_page()
        self.page.set_default_timeout(10_000)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        self.page.on(
            "console",
            lambda message: self.errors.append(f"console: {message.text}") if message.type == "error" else None,
        )

    def open(self, hash_route: str = "#/") -> Any:
        self.page.goto(f"{self.base_url}/ui/{hash_route}")
        return self.page

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.evaluate("window.scrollTo(0, 0)")  # a full-page shot of a scrolled page offsets the sticky bar
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def ui(browser: Any) -> Iterator[Callable[..., BrowserPage]]:
    """`ui(server)` → a BrowserPage on that server. JavaScript errors fail the test, except the
    console lines of HTTP errors a test provokes on purpose (`expected_http_errors=True`)."""
    opened: list[tuple[BrowserPage, bool]] = []

    def open_page(server: Any, expected_http_errors: bool = False) -> BrowserPage:
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        page = BrowserPage(context, server.url)
        opened.append((page, expected_http_errors))
        return page

    yield open_page
    problems = []
    for page, expected_http_errors in opened:
        for error in page.errors:
            if expected_http_errors and "Failed to load resource" in error:
                continue
            problems.append(error)
        page.context.close()
    assert not problems, f"the UI reported errors: {problems}"
