"""LLM request traces: with `ENGRAM_LLM_TRACE_ENABLED` (or `HINDSIGHT_API_LLM_TRACE_ENABLED`) every
LLM call is stored — bank, operation and scope, provider and model, status, tokens, latency, and the
request messages and the answer, each cut to `ENGRAM_LLM_TRACE_MAX_CHARS` characters. Rows older than
`ENGRAM_LLM_TRACE_RETENTION_DAYS` are removed (at most one pass an hour per process). Storing a trace
never fails the call it traces."""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.llm.base import LLMResponse
from engram.llm.trace_context import current

log = logging.getLogger("engram.llm")
PRUNE_EVERY = 3600.0


def bounded(value: Any, max_chars: int) -> Any:
    """`value` as JSON, or a `{"truncated": …}` excerpt when its JSON is longer than `max_chars`."""
    text = json.dumps(value, default=str)
    if len(text) <= max_chars:
        return value
    return {"truncated": True, "chars": len(text), "excerpt": text[:max_chars]}


def scope_of(options: dict[str, Any]) -> str:
    if options.get("json_schema") is not None:
        return str(options.get("schema_name") or "structured")
    return "tools" if options.get("tools") else "completion"


class TracingProvider:
    def __init__(self, inner: Any, store: Any, *, max_chars: int, retention_days: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.store = store  # its pool is looked up per call: the supervisor may replace it
        self.max_chars = max_chars
        self.retention_days = retention_days
        self._pruned_at = -math.inf  # 0.0 skipped the first pass on a machine up for under an hour

    async def complete(self, messages: list[dict[str, Any]], **options: Any) -> LLMResponse:
        started_at, started = datetime.now(UTC), time.perf_counter()
        try:
            response = await self.inner.complete(messages, **options)
        except Exception as exc:
            await self.record(messages, options, started_at, started, None, getattr(exc, "message", None) or str(exc))
            raise
        await self.record(messages, options, started_at, started, response, None)
        return response

    async def record(self, messages: list[dict[str, Any]], options: dict[str, Any], started_at: datetime,
                     started: float, response: LLMResponse | None, error: str | None) -> None:
        from engram.store import llm_requests as store

        duration = time.perf_counter() - started
        context = current()
        output = None if response is None else {
            "text": response.text, "tool_calls": [c.to_message() for c in response.tool_calls],
            "finish_reason": response.finish_reason}
        request = {"messages": messages, **{k: v for k, v in options.items() if k in ("tools", "tool_choice",
                                                                                      "json_schema", "max_tokens")}}
        try:
            await store.insert(self.store.pool, {
                "id": uuid.uuid4(), "bank_id": context.bank_id, "operation": context.operation,
                "scope": scope_of(options), "provider": self.name, "model": self.model,
                "status": "success" if error is None else "error", "started_at": started_at,
                "ended_at": started_at + timedelta(seconds=duration), "duration_ms": round(duration * 1000),
                "input_tokens": response.usage.input_tokens if response else None,
                "output_tokens": response.usage.output_tokens if response else None,
                "input": bounded(request, self.max_chars), "output": bounded(output, self.max_chars),
                "error": error[: self.max_chars] if error else None,
                "metadata": {"operation_id": context.operation_id} if context.operation_id else {},
            })
            if self.retention_days >= 0 and time.monotonic() - self._pruned_at > PRUNE_EVERY:
                self._pruned_at = time.monotonic()
                await store.prune(self.store.pool, self.retention_days)
        except Exception:  # the trace is a by-product: never the call's failure
            log.warning("LLM trace not stored", exc_info=True)

    async def aclose(self) -> None:
        await self.inner.aclose()
