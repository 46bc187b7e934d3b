"""Probe the configured LLM with one tiny completion: is it reachable, does it accept our key, how
fast does it answer. Engram sends retain, consolidation and reflect to the one provider, so one probe
answers for all three operations."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engram.errors import LLMError

OPERATIONS = ("retain", "consolidation", "reflect")
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word: ok"}]
PROBE_TIMEOUT = 30.0  # a provider slower than this for one word is as good as down for a health check


def classify_failure(exc: BaseException) -> str:
    """The contract's LlmHealthStatus for a failed probe."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    text = getattr(exc, "message", str(exc))
    if "HTTP 401" in text or "HTTP 403" in text:
        return "auth_failed"
    if "timed out" in text:
        return "timeout"
    return "unreachable"


async def probe(provider: Any, timeout: float = PROBE_TIMEOUT) -> dict[str, Any]:
    """`{"ok", "status", "latency_ms", "error"}` for one completion; never raises for a provider failure."""
    if provider is None:
        return {"ok": False, "status": "not_configured", "latency_ms": None,
                "error": "no LLM is configured: set ENGRAM_LLM_PROVIDER (or HINDSIGHT_API_LLM_PROVIDER)"}
    started = time.perf_counter()
    try:
        await asyncio.wait_for(provider.complete(PROBE_MESSAGES, temperature=0.0, max_tokens=5), timeout)
    except (LLMError, TimeoutError) as exc:
        return {"ok": False, "status": classify_failure(exc), "latency_ms": None,
                "error": getattr(exc, "message", None) or f"no answer within {timeout:g}s"}
    latency = round((time.perf_counter() - started) * 1000, 1)
    return {"ok": True, "status": "connected", "latency_ms": latency, "error": None}


async def bank_llm_health(provider: Any, bank_id: str) -> dict[str, Any]:
    result = await probe(provider)
    model = {"provider": provider.name, "model": provider.model} if provider is not None else {}
    return {"bank_id": bank_id, "operations": [{"operation": op, **result, **model} for op in OPERATIONS]}
