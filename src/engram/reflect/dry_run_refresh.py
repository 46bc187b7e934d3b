"""A mental model's refresh run without storing anything: the reflect call the real refresh makes,
and what it would change (candidate content, unified diff, the facts it rests on)."""

from __future__ import annotations

import difflib
import time
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.errors import LLMNotConfigured, NotFound
from engram.recall.rows import iso
from engram.reflect.mental_models import refresh_request
from engram.store import reflect_state as store

if TYPE_CHECKING:
    from engram.services import Services


def _scope(row: Any, request: Any) -> dict[str, Any]:
    return {
        "tags": request.tags, "tags_match": request.tags_match,
        "tag_groups": [g.model_dump(mode="json") if hasattr(g, "model_dump") else g for g in request.tag_groups or []]
        or None,
        "fact_types": request.fact_types, "exclude_mental_models": bool(request.exclude_mental_models),
        "exclude_mental_model_ids": [i for i in request.exclude_mental_model_ids or [] if i != row["id"]],
    }


def outcome_of(current: str, candidate: str) -> tuple[str, bool]:
    """The contract's outcome for a refresh that produced `candidate`, and whether it would be stored."""
    if not candidate.strip():
        return "refresh_failed_empty_candidate", False
    if candidate == current:
        return "content_unchanged", False
    return "content_written", True


async def dry_run_refresh(services: Services, bank_id: str, model_id: str) -> dict[str, Any]:
    from engram.reflect.agent import reflect

    if services.llm is None:
        raise LLMNotConfigured("a dry-run refresh of a mental model")
    row = await store.get_mental_model(services.pool, bank_id, model_id)
    if row is None:
        raise NotFound(f"mental model '{model_id}' not found in bank '{bank_id}'")
    request = refresh_request(row)
    started = time.perf_counter()
    now = datetime.now(UTC)
    response = await reflect(services, bank_id, request)
    duration_ms = int((time.perf_counter() - started) * 1000)
    current, candidate = row["content"] or "", response.text
    outcome, would_persist = outcome_of(current, candidate)
    facts = response.based_on.memories if response.based_on else []
    used = Counter(f.type or "world" for f in facts)
    usage = (response.usage.model_dump() if response.usage else {}) | {"cached_tokens": 0, "thoughts_tokens": 0}
    llm_calls = [c.model_dump() for c in (response.trace.llm_calls if response.trace else [])]
    diff = "".join(difflib.unified_diff(current.splitlines(keepends=True), candidate.splitlines(keepends=True),
                                        "current", "candidate"))
    return {
        "mental_model_id": model_id, "name": row["name"], "requested_mode": "full", "effective_mode": "full",
        "mode_fallback_reason": None, "outcome": outcome, "would_persist": would_persist,
        "scope": _scope(row, request),
        "window": {"created_after": None, "created_before": iso(now), "watermark": iso(row["last_memory_seen_at"])},
        "facts": {"retrieved": dict(used), "used": dict(used)},
        "based_on": {"memories": [f.model_dump(mode="json") for f in facts]},
        "current_content": current, "candidate_content": candidate,
        "preview_content": candidate if would_persist else current, "diff": diff,
        "delta_operations": None, "retraction": None,
        "trace": {"recorded_at": iso(now), "effective_mode": "full", "mode_fallback_reason": None,
                  "outcome": outcome, "tool_calls": [], "llm_calls": llm_calls, "usage": usage,
                  "duration_ms": duration_ms, "warnings": []},
        "usage": usage, "duration_ms": duration_ms, "warnings": [],
    }
