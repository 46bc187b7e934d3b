"""Events and the deliveries they become. An event is written as one delivery row per subscribed
webhook, in the caller's transaction, so an event is recorded exactly when the thing it reports is;
the worker's sender does the HTTP. The body follows Hindsight 1.1.0's event shape:
`{event_id, event, bank_id, operation_id, status, timestamp, data}`."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from engram.store import webhooks as store
from engram.store.tx import Conn

RETAIN = "retain.completed"
CONSOLIDATION = "consolidation.completed"
MENTAL_MODEL = "mental_model.refreshed"  # Engram's own: a mental model's refresh finished
MEMORY_DEFENSE = "memory_defense.triggered"  # 1.1.0's; accepted, never fired (Engram has no memory defense)
EVENT_TYPES = (CONSOLIDATION, RETAIN, MENTAL_MODEL, MEMORY_DEFENSE)
DEFAULT_EVENT_TYPES = [CONSOLIDATION]
OPERATION_EVENTS = {"retain": RETAIN, "consolidation": CONSOLIDATION, "refresh_mental_model": MENTAL_MODEL}


def event_data(operation_type: str, payload: dict[str, Any], result: dict[str, Any] | None,
               error: str | None) -> dict[str, Any]:
    result = result or {}
    if operation_type == "consolidation":
        return {name: result.get(name, 0) if error is None else None
                for name in ("observations_created", "observations_updated", "observations_deleted")} | {
            "error_message": error}
    if operation_type == "retain":
        items = payload.get("items") or []
        documents = sorted({i["document_id"] for i in items if isinstance(i, dict) and i.get("document_id")})
        return {"document_id": documents[0] if len(documents) == 1 else None, "document_ids": documents,
                "tags": payload.get("document_tags"), "items_count": len(items),
                "memory_unit_count": result.get("facts"), "error_message": error}
    return {"mental_model_id": payload.get("mental_model_id"), "outcome": result.get("outcome"),
            "error_message": error}


async def record_event(conn: Conn, bank_id: str, event_type: str, operation_id: uuid.UUID | None, status: str,
                       data: dict[str, Any]) -> int:
    """Queue the event for every enabled webhook of the bank subscribed to it; returns how many."""
    targets = await store.subscribed(conn, bank_id, event_type)
    if not targets:
        return 0
    event_id = uuid.uuid4()
    body = json.dumps({
        "event_id": str(event_id), "event": event_type, "bank_id": bank_id,
        "operation_id": str(operation_id) if operation_id else None, "status": status,
        "timestamp": datetime.now(UTC).isoformat(), "data": data,
    })
    await store.add_deliveries(conn, bank_id, event_id, event_type, body, targets)
    return len(targets)


async def record_operation_event(conn: Conn, operation: Any, status: str, result: dict[str, Any] | None,
                                 error: str | None) -> int:
    """The event of a finished operation, when its type has one."""
    event_type = OPERATION_EVENTS.get(operation["operation_type"])
    if event_type is None:
        return 0
    data = event_data(operation["operation_type"], operation["payload"] or {}, result, error)
    return await record_event(conn, operation["bank_id"], event_type, operation["id"], status, data)


async def record_sync_retain(conn: Conn, bank_id: str, payload: dict[str, Any], facts: int) -> int:
    """A synchronous retain has no operation; its event carries `operation_id: null`."""
    return await record_event(conn, bank_id, RETAIN, None, "completed",
                              event_data("retain", payload, {"facts": facts}, None))
