"""A bank's audit log: entries newest first (filters, paging), one entry whole, and counts per time
bucket and action. Entries are written by `engram.audit.middleware` when the audit log is enabled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Query

from engram.api.deps import parse_uuid, require_bank, services
from engram.api.tooling import PERIODS, bucket_start
from engram.errors import InvalidInput, NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import audit as store

router = APIRouter(prefix="/v1/default/banks/{bank_id}/audit-logs", tags=["Audit"])


def parse_date(value: str | None, field: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(field, f"not an ISO 8601 date or time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _summary(row: Any) -> dict[str, Any]:
    return {"id": str(row["id"]), "action": row["action"], "transport": row["transport"], "bank_id": row["bank_id"],
            "started_at": iso(row["started_at"]), "ended_at": iso(row["ended_at"]),
            "duration_ms": row["duration_ms"], "metadata": row["metadata"] or {}}


@router.get("")
async def list_audit_logs(bank_id: str, action: str | None = None, transport: str | None = None,
                          start_date: str | None = None, end_date: str | None = None,
                          limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**31 - 1),
                          svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    rows, total = await store.list_entries(svc.pool, bank_id, action, transport, parse_date(start_date, "start_date"),
                                           parse_date(end_date, "end_date"), limit, offset)
    return {"bank_id": bank_id, "total": total, "limit": limit, "offset": offset, "items": [_summary(r) for r in rows]}


@router.get("/stats")
async def audit_log_stats(bank_id: str, action: str | None = None, period: str = "7d",
                          svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    period = period if period in PERIODS else "7d"
    trunc, step, count = PERIODS[period]
    first = bucket_start(datetime.now(UTC), trunc) - step * (count - 1)
    buckets = {first + step * i: {"time": (first + step * i).isoformat(), "actions": {}, "total": 0}
               for i in range(count)}
    for row in await store.counts_per_bucket(svc.pool, bank_id, action, trunc, first):
        bucket = buckets.get(row["bucket"].replace(tzinfo=UTC))
        if bucket is not None:
            bucket["actions"][row["action"]] = row["count"]
            bucket["total"] += row["count"]
    return {"bank_id": bank_id, "period": period, "trunc": trunc, "start": first.isoformat(),
            "buckets": list(buckets.values())}


@router.get("/{log_id}")
async def get_audit_log(bank_id: str, log_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    row = await store.get_entry(svc.pool, bank_id, parse_uuid(log_id, "audit log entry"))
    if row is None:
        raise NotFound(f"audit log entry '{log_id}' not found in bank '{bank_id}'")
    return _summary(row) | {"request": row["request"], "response": row["response"]}
