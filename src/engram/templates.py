"""Bank templates: a bank's configuration, mental models and directives as one portable manifest
(`GET …/export`, `POST …/import`), so a bank's setup can be copied, versioned and restored."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pydantic import Field

from engram.bank_config import invalid_overrides, validate_updates
from engram.errors import InvalidInput
from engram.store import reflect_state as store
from engram.store.banks import ensure_bank, get_bank, set_config_overrides
from engram.store.writer_locks import wait_for_bank_writers
from engram.types import CreateDirectiveRequest, MentalModelTrigger, Model

if TYPE_CHECKING:
    from engram.services import Services

TEMPLATE_VERSION = "1"


class TemplateMentalModel(Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")
    name: str
    source_query: str
    tags: list[str] = Field(default_factory=list)
    max_tokens: int = Field(2048, ge=256, le=8192)  # Hindsight's BankTemplateMentalModel range
    trigger: MentalModelTrigger = Field(default_factory=MentalModelTrigger)


class BankTemplateManifest(Model):
    version: str
    bank: dict[str, Any] | None = None
    mental_models: list[TemplateMentalModel] | None = None
    directives: list[CreateDirectiveRequest] | None = None


async def export_template(services: Services, bank_id: str) -> BankTemplateManifest:
    bank = await get_bank(services.pool, bank_id)
    models, _ = await store.list_mental_models(services.pool, bank_id, tags=None, tags_match="any", limit=10_000,
                                               offset=0)
    directives, _ = await store.list_directives(services.pool, bank_id, tags=None, tags_match="any",
                                                active_only=False, limit=10_000, offset=0)
    overrides = dict(bank["config"] or {})
    ignored = invalid_overrides(overrides)  # stored by an older version, not in effect: not exported
    return BankTemplateManifest(
        version=TEMPLATE_VERSION,
        bank={key: value for key, value in overrides.items() if key not in ignored},
        mental_models=[
            TemplateMentalModel(id=m["id"], name=m["name"], source_query=m["source_query"], tags=list(m["tags"]),
                                max_tokens=m["max_tokens"], trigger=MentalModelTrigger.model_validate(m["trigger"]))
            for m in models
        ],
        directives=[
            CreateDirectiveRequest(name=d["name"], content=d["content"], priority=d["priority"],
                                   is_active=d["is_active"], tags=list(d["tags"]))
            for d in directives
        ],
    )


async def import_template(
    services: Services, bank_id: str, manifest: BankTemplateManifest, *, dry_run: bool
) -> dict[str, Any]:
    """Apply a manifest: config keys are validated like PATCH …/config (nothing is written when any is
    wrong); mental models are created or updated by id; directives by name."""
    from engram.models.embedder import embed_query
    from engram.reflect.mental_models import schedule_refresh, validate_trigger

    if manifest.version != TEMPLATE_VERSION:
        raise InvalidInput("version", f"unsupported template version {manifest.version!r} (expected {TEMPLATE_VERSION})")
    config = validate_updates(manifest.bank or {}, where="bank")
    for index, model in enumerate(manifest.mental_models or []):
        validate_trigger(model.trigger, f"mental_models[{index}].trigger")
    existing_models = {m["id"] for m in (await store.list_mental_models(
        services.pool, bank_id, tags=None, tags_match="any", limit=10_000, offset=0))[0]}
    existing_directives = {d["name"]: d["id"] for d in (await store.list_directives(
        services.pool, bank_id, tags=None, tags_match="any", active_only=False, limit=10_000, offset=0))[0]}
    result: dict[str, Any] = {
        "bank_id": bank_id, "config_applied": bool(config) and not dry_run, "dry_run": dry_run,
        "mental_models_created": [m.id for m in manifest.mental_models or [] if m.id not in existing_models],
        "mental_models_updated": [m.id for m in manifest.mental_models or [] if m.id in existing_models],
        "directives_created": [d.name for d in manifest.directives or [] if d.name not in existing_directives],
        "directives_updated": [d.name for d in manifest.directives or [] if d.name in existing_directives],
        "operation_ids": [],
    }
    if dry_run:
        return result
    # The config goes on the bank's row, which an import into the bank holds: wait as a config change does.
    await wait_for_bank_writers(services.pool, bank_id, services.settings.import_wait_seconds, undone="changed")
    await ensure_bank(services.pool, bank_id)
    async with services.pool.acquire() as conn, conn.transaction():
        if config:
            bank = await get_bank(conn, bank_id)
            merged = {k: v for k, v in {**(bank["config"] or {}), **config}.items() if v is not None}
            await set_config_overrides(conn, bank_id, merged)
        for model in manifest.mental_models or []:
            vector = await asyncio.to_thread(embed_query, f"{model.name}: {model.source_query}")
            fields = {"name": model.name, "source_query": model.source_query, "tags": model.tags,
                      "max_tokens": model.max_tokens, "trigger": model.trigger.model_dump(mode="json", exclude_none=True)}
            if model.id in existing_models:
                await store.update_mental_model(conn, bank_id, model.id, {**fields, "embedding": vector})
            else:
                await store.insert_mental_model(conn, bank_id, model.id, vector=vector, **fields)
        for directive in manifest.directives or []:
            if directive.name in existing_directives:
                await store.update_directive(conn, bank_id, existing_directives[directive.name], directive.model_dump())
            else:
                await store.insert_directive(conn, bank_id, **directive.model_dump())
    if services.llm is not None:
        for model_id in result["mental_models_created"]:
            result["operation_ids"].append(str(await schedule_refresh(services, bank_id, model_id)))
    return result
