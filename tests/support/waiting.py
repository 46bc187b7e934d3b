"""Waiting for background work in tests: polling with a deadline, and a bank's operations settling."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """Poll `condition` until it returns something truthy (returned), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def settle(http: httpx.Client, bank_id: str, timeout: float = 60) -> dict[str, Any]:
    """Wait until the bank has no pending or processing operation; return its stats."""

    def idle() -> dict[str, Any] | None:
        stats = http.get(f"/v1/default/banks/{bank_id}/stats").json()
        return stats if stats["pending_operations"] == 0 else None

    return wait_for(idle, f"the operations of {bank_id} to settle", timeout)


def finish_operation(http: httpx.Client, bank_id: str, operation_id: str, timeout: float = 90) -> dict[str, Any]:
    """Wait until one operation has completed or failed; return its status."""

    def ended() -> dict[str, Any] | None:
        status = http.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json()
        return status if status["status"] in ("completed", "failed", "cancelled") else None

    return wait_for(ended, f"operation {operation_id}", timeout)
