"""`engram bank delete` with a progress bar. The delete is one request, answered once the whole bank
is gone (one transaction: ~20 s at 100,000 memories, ~30 min at 10 M); meanwhile the server writes
how far it has gone, which `GET …/banks/{bank}/removal` reads, polled here beside the request."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from engram.cli_command import UserError
from engram.cli_http import Client, bank_path
from engram.cli_import import Reporter

POLL_SECONDS = 0.5


def delete_bank_with_progress(client: Client, bank: str) -> None:
    """Delete the bank; its progress (facts deleted) on stderr. Raises UserError as the request does."""
    with ThreadPoolExecutor(1) as pool:
        deleting = pool.submit(client.request, "DELETE", bank_path(bank), timeout=None)
        reporter: Reporter | None = None
        while not _done(deleting):
            removal = _removal(client, bank)
            if removal is None:
                continue
            if reporter is None:
                reporter = Reporter(f"deleting bank {bank}", int(removal["total"]), "facts")
            reporter.advance(int(removal["done"]) - reporter.done)
        if reporter is not None:
            if deleting.exception() is None:
                reporter.advance(reporter.total - reporter.done)
            reporter.close()
        deleting.result()


def _done(request: Future[Any]) -> bool:
    return bool(wait([request], timeout=POLL_SECONDS).done)


def _removal(client: Client, bank: str) -> dict[str, Any] | None:
    """The bank's delete as far as it has gone, or None (not begun, over, or the poll failed)."""
    try:
        return client.request("GET", bank_path(bank, "/removal"), timeout=10)
    except UserError:
        return None
