"""The worker's webhook sender: claims due deliveries, sends them signed, and records each attempt
(status code, latency, error, a bounded response body). 2xx is delivered; a 5xx, 408, 429, timeout
or connection error is retried with exponential backoff (base × 2^(attempt-1)) until
`webhook_max_attempts`; any other answer fails the delivery at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput
from engram.store import webhooks as store
from engram.store.pool import is_unavailable
from engram.webhooks.signing import sign, sign_v2
from engram.webhooks.targets import check_target

if TYPE_CHECKING:
    import httpx

    from engram.services import Services

log = logging.getLogger("engram.webhooks")
BATCH = 16
MAX_BODY_KEPT = 2000
MAX_TIMEOUT = 120.0
RETRYABLE = frozenset({408, 429})


def request_headers(delivery: Any, config: dict[str, Any], body: bytes) -> dict[str, str]:
    """The caller's headers first, then Engram's, so a custom header cannot forge an event or a signature."""
    headers = {"Content-Type": "application/json", **(config.get("headers") or {}),
               "X-Hindsight-Event": delivery["event_type"], "X-Hindsight-Event-Id": str(delivery["event_id"]),
               "X-Hindsight-Delivery-Id": str(delivery["id"]), "User-Agent": "engram-webhooks"}
    if delivery["secret"]:
        headers["X-Hindsight-Signature"] = headers["X-Hub-Signature-256"] = sign(delivery["secret"], body)
        headers["X-Hindsight-Signature-V2"] = sign_v2(delivery["secret"], body, int(time.time()))
    return headers


class Sender:
    """Its HTTP client (and httpx, ~11 MB and ~130 ms of a server's start) is made at the first
    delivery: most servers never send one."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def backoff(self, attempts_before: int) -> timedelta:
        return timedelta(seconds=self.services.settings.webhook_retry_base_seconds * 2 ** attempts_before)

    async def send_due(self, polling: asyncio.Lock | None = None) -> int:
        """Send one batch of due deliveries; returns how many were attempted. `polling` is held while
        claiming them (the worker's lock: see `Worker`)."""
        async with polling or contextlib.nullcontext():
            batch = await store.claim_due(self.services.pool, BATCH, MAX_TIMEOUT + 30)
        await asyncio.gather(*(self.send(delivery) for delivery in batch))
        return len(batch)

    async def send(self, delivery: Any) -> None:
        import httpx

        config = delivery["http_config"] or {}
        body = delivery["body"].encode()
        timeout = min(MAX_TIMEOUT, float(config.get("timeout_seconds") or 30))
        started = time.perf_counter()
        status_code = response_body = error = None
        try:
            await check_target(delivery["url"], allow_private=self.services.settings.webhook_allow_private_targets)
            get = str(config.get("method") or "POST").upper() == "GET"
            response = await self.client.request(
                "GET" if get else "POST", delivery["url"], params=config.get("params") or None,
                content=None if get else body, headers=request_headers(delivery, config, body), timeout=timeout,
            )
            status_code, response_body = response.status_code, response.text[:MAX_BODY_KEPT]
        except InvalidInput as exc:
            error, retry = exc.message, False
        except httpx.TimeoutException:
            error, retry = f"timed out after {timeout:g}s", True
        except httpx.HTTPError as exc:
            error, retry = f"{type(exc).__name__}: {exc}", True
        else:
            retry = status_code >= 500 or status_code in RETRYABLE
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        latency = round((time.perf_counter() - started) * 1000, 1)
        await self.record(delivery, status_code, response_body, error, retry, latency)

    async def record(self, delivery: Any, status_code: int | None, response_body: str | None, error: str | None,
                     retry: bool, latency: float) -> None:
        attempts = delivery["attempts"] + 1
        if error is None:
            status, next_at = "delivered", None
        elif retry and attempts < self.services.settings.webhook_max_attempts:
            status, next_at = "pending", datetime.now(UTC) + self.backoff(delivery["attempts"])
        else:
            status, next_at = "failed", None
        if error:
            log.info("webhook delivery %s to %s: %s (attempt %d, %s)", delivery["id"], delivery["url"], error,
                     attempts, status)
        await store.record_attempt(self.services.pool, delivery["id"], status=status, next_attempt_at=next_at,
                                   error=error, response_status=status_code, response_body=response_body,
                                   latency_ms=latency)


async def delivery_loop(services: Services, polling: asyncio.Lock | None = None) -> None:
    """Runs in the worker next to the operation slots, polling at the worker's interval (its claims
    taking turns with theirs through `polling`)."""
    sender = Sender(services)
    interval = services.settings.worker_poll_interval
    try:
        while True:
            try:
                sent = await sender.send_due(polling)
            except Exception as exc:  # the database may be restarting: try again next tick
                if not is_unavailable(exc):
                    log.exception("webhook deliveries failed")
                sent = 0
            if not sent:
                await asyncio.sleep(interval)
    finally:
        with contextlib.suppress(Exception):
            await sender.aclose()
