"""Webhooks of a bank: create, list, update, delete, and each one's deliveries (newest first, by
cursor). The secret is write-only: answers never carry it (`secret: null`, `has_secret` says
whether one is set)."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from engram.api.deps import parse_uuid, require_bank, services
from engram.errors import InvalidInput, NotFound
from engram.recall.rows import iso
from engram.services import Services
from engram.store import webhooks as store
from engram.webhooks.events import DEFAULT_EVENT_TYPES, EVENT_TYPES
from engram.webhooks.targets import check_target

router = APIRouter(prefix="/v1/default/banks/{bank_id}/webhooks", tags=["Webhooks"])


class WebhookHttpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    method: Literal["POST", "GET", "post", "get"] = "POST"
    timeout_seconds: int = Field(30, ge=1, le=120)
    headers: dict[str, StrictStr] = Field(default_factory=dict)
    params: dict[str, StrictStr] = Field(default_factory=dict)


class CreateWebhookRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: StrictStr
    secret: StrictStr | None = None
    event_types: list[StrictStr] = Field(default_factory=lambda: list(DEFAULT_EVENT_TYPES))
    enabled: StrictBool = True
    http_config: WebhookHttpConfig = Field(default_factory=WebhookHttpConfig)


class UpdateWebhookRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: StrictStr | None = None
    secret: StrictStr | None = None  # sent as null: cleared; left out: kept
    event_types: list[StrictStr] | None = None
    enabled: StrictBool | None = None
    http_config: WebhookHttpConfig | None = None


def _event_types(values: list[str]) -> list[str]:
    if not values:
        raise InvalidInput("event_types", f"must name at least one of {', '.join(EVENT_TYPES)}")
    unknown = [v for v in values if v not in EVENT_TYPES]
    if unknown:
        raise InvalidInput("event_types", f"unknown {unknown[0]!r}; one of {', '.join(EVENT_TYPES)}")
    return list(dict.fromkeys(values))


def _http_config(config: WebhookHttpConfig) -> dict[str, Any]:
    return config.model_dump() | {"method": config.method.upper()}


def _webhook(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]), "bank_id": row["bank_id"], "url": row["url"], "secret": None,
        "has_secret": row["secret"] is not None, "event_types": list(row["event_types"]), "enabled": row["enabled"],
        "http_config": WebhookHttpConfig.model_validate(row["http_config"] or {}).model_dump(),
        "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
    }


async def _target(svc: Services, url: str) -> str:
    await check_target(url, allow_private=svc.settings.webhook_allow_private_targets)
    return url


@router.post("", status_code=201)
async def create_webhook(bank_id: str, body: CreateWebhookRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    fields = {"url": await _target(svc, body.url), "secret": body.secret or None,
              "event_types": _event_types(body.event_types), "enabled": body.enabled,
              "http_config": _http_config(body.http_config)}
    return _webhook(await store.create_webhook(svc.pool, bank_id, fields))


@router.get("")
async def list_webhooks(bank_id: str, limit: int = Query(100, ge=0, le=1000),
                        offset: int = Query(0, ge=0, le=2**31 - 1),
                        svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    rows, total = await store.list_webhooks(svc.pool, bank_id, limit, offset)
    return {"items": [_webhook(r) for r in rows], "total": total, "limit": limit, "offset": offset}


async def _existing(svc: Services, bank_id: str, webhook_id: str) -> tuple[uuid.UUID, Any]:
    await require_bank(svc, bank_id)
    key = parse_uuid(webhook_id, "webhook")
    row = await store.get_webhook(svc.pool, bank_id, key)
    if row is None:
        raise NotFound(f"webhook '{webhook_id}' not found in bank '{bank_id}'")
    return key, row


@router.patch("/{webhook_id}")
async def update_webhook(bank_id: str, webhook_id: str, body: UpdateWebhookRequest,
                         svc: Services = Depends(services)) -> dict[str, Any]:
    key, _ = await _existing(svc, bank_id, webhook_id)
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    if "url" in given:
        if body.url is None:
            raise InvalidInput("url", "must not be null")
        changes["url"] = await _target(svc, body.url)
    if "secret" in given:
        changes["secret"] = body.secret or None
    if "event_types" in given:
        changes["event_types"] = _event_types(body.event_types or [])
    if "enabled" in given and body.enabled is not None:
        changes["enabled"] = body.enabled
    if "http_config" in given and body.http_config is not None:
        changes["http_config"] = _http_config(body.http_config)
    row = await store.update_webhook(svc.pool, bank_id, key, changes)
    if row is None:
        raise NotFound(f"webhook '{webhook_id}' not found in bank '{bank_id}'")
    return _webhook(row)


@router.delete("/{webhook_id}")
async def delete_webhook(bank_id: str, webhook_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    key, _ = await _existing(svc, bank_id, webhook_id)
    await store.delete_webhook(svc.pool, bank_id, key)
    return {"success": True, "message": f"webhook '{webhook_id}' deleted", "deleted_count": 1}


def _cursor(row: Any) -> str:
    return base64.urlsafe_b64encode(f"{row['created_at'].isoformat()}|{row['id']}".encode()).decode()


def _parse_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        at, _, key = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(at), uuid.UUID(key)
    except ValueError:
        raise InvalidInput("cursor", "not a cursor this server handed out") from None


def _delivery(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]), "event_id": str(row["event_id"]), "webhook_id": str(row["webhook_id"]),
        "url": row["url"], "event_type": row["event_type"], "status": row["status"], "attempts": row["attempts"],
        "next_retry_at": iso(row["next_attempt_at"]) if row["status"] == "pending" else None,
        "last_error": row["last_error"], "last_response_status": row["last_response_status"],
        "last_response_body": row["last_response_body"], "last_latency_ms": row["last_latency_ms"],
        "last_attempt_at": iso(row["last_attempt_at"]), "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]), "body": row["body"],
    }


@router.get("/{webhook_id}/deliveries")
async def list_webhook_deliveries(bank_id: str, webhook_id: str, limit: int = Query(50, ge=1, le=200),
                                  cursor: str | None = None, svc: Services = Depends(services)) -> dict[str, Any]:
    key, _ = await _existing(svc, bank_id, webhook_id)
    rows = await store.list_deliveries(svc.pool, key, limit + 1, _parse_cursor(cursor) if cursor else None)
    page = rows[:limit]
    return {"items": [_delivery(r) for r in page], "next_cursor": _cursor(page[-1]) if len(rows) > limit else None}
