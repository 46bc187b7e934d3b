"""A bank's LLM traces (written when `ENGRAM_LLM_TRACE_ENABLED` is on): calls newest first with
filters and paging, and per-bucket counts by status with token sums."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query

from engram.api.audit_logs import parse_date
from engram.api.deps import require_bank, services
from engram.api.tooling import PERIODS, bucket_start
from engram.recall.rows import iso
from engram.services import Services
from engram.store import llm_requests as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}/llm-requests", tags=["LLM Traces"])
CallType = Literal["llm", "embedding", "rerank", "decision"]


def _entry(row: Any) -> dict[str, Any]:
    metadata = row["metadata"] or {}
    tokens = [row["input_tokens"], row["output_tokens"]]
    return {
        "id": str(row["id"]), "bank_id": row["bank_id"], "operation": row["operation"], "scope": row["scope"],
        "trace_id": metadata.get("operation_id"), "span_id": str(row["id"]), "parent_span_id": None,
        "provider": row["provider"], "model": row["model"], "status": row["status"],
        "started_at": iso(row["started_at"]), "ended_at": iso(row["ended_at"]), "duration_ms": row["duration_ms"],
        "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"], "cached_tokens": 0,
        "thoughts_tokens": None, "total_tokens": sum(tokens) if None not in tokens else None,
        "input": row["input"], "output": row["output"], "error": row["error"], "llm_info": {"call_type": "llm"},
        "metadata": metadata,
    }


@router.get("")
async def list_llm_requests(
    bank_id: str, status: str | None = None, operation: str | None = None, scope: str | None = None,
    call_type: CallType | None = None, provider: str | None = None, trace_id: str | None = None,
    document_id: str | None = None, memory_id: str | None = None, group: bool = False,
    start_date: str | None = None, end_date: str | None = None, limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=2**31 - 1), svc: Services = Depends(services),
) -> dict[str, Any]:
    """Every traced call is an LLM call: `call_type` other than `llm` lists nothing. `document_id`,
    `memory_id` and `group` are accepted for compatibility and do not filter."""
    await require_bank(svc, bank_id)
    if call_type not in (None, "llm"):
        return {"bank_id": bank_id, "total": 0, "limit": limit, "offset": offset, "items": []}
    filters = {"bank_id": bank_id, "status": status, "operation": operation, "scope": scope, "provider": provider,
               "operation_id": trace_id}
    rows, total = await store.list_requests(svc.pool, filters, parse_date(start_date, "start_date"),
                                            parse_date(end_date, "end_date"), limit, offset)
    return {"bank_id": bank_id, "total": total, "limit": limit, "offset": offset, "items": [_entry(r) for r in rows]}


@router.get("/stats")
async def llm_request_stats(bank_id: str, operation: str | None = None, call_type: CallType | None = None,
                            period: str = "7d", svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    period = period if period in PERIODS else "7d"
    trunc, step, count = PERIODS[period]
    first = bucket_start(datetime.now(UTC), trunc) - step * (count - 1)
    buckets = {first + step * i: {"time": (first + step * i).isoformat(), "statuses": {}, "total": 0,
                                  "tokens": {"input": 0, "output": 0, "cached": 0, "thoughts": None, "total": 0}}
               for i in range(count)}
    rows = [] if call_type not in (None, "llm") else await store.per_bucket(
        svc.pool, {"bank_id": bank_id, "operation": operation}, trunc, first)
    for row in rows:
        bucket = buckets.get(row["bucket"].replace(tzinfo=UTC))
        if bucket is None:
            continue
        bucket["statuses"][row["status"]] = row["count"]
        bucket["total"] += row["count"]
        tokens = bucket["tokens"]
        tokens["input"] += row["input"]
        tokens["output"] += row["output"]
        tokens["total"] += row["input"] + row["output"]
    return {"bank_id": bank_id, "period": period, "trunc": trunc, "start": first.isoformat(),
            "buckets": list(buckets.values())}
