"""The MCP tools: each is an arguments model and an async function over the services, calling the same
capabilities as the HTTP API. A tool's docstring is the description agents read."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engram.errors import BankNotFound, EngramError, InvalidInput, NotFound
from engram.recall.rows import iso

if TYPE_CHECKING:
    from engram.services import Services

Budget = Literal["low", "mid", "high"]
TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
FactType = Literal["world", "experience", "observation"]
OperationStatus = Literal["pending", "processing", "completed", "failed", "cancelled"]


class ReflectUnavailable(EngramError):
    """This build has no reflect capability (or not yet): said plainly, never a fake answer."""

    status = 501

    def __init__(self, feature: str) -> None:
        super().__init__(f"{feature} is not available in this Engram server yet")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[Args]
    run: Callable[[Services, Any, Any], Awaitable[dict[str, Any]]]
    per_bank: bool  # takes a bank (the `bank_id` argument, or the endpoint's bank)
    single_bank: bool  # offered on a single-bank endpoint


TOOLS: dict[str, ToolSpec] = {}


def tool(name: str, args: type[Args], *, per_bank: bool = True, single_bank: bool = True) -> Callable[..., Any]:
    def register(fn: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[dict[str, Any]]]:
        TOOLS[name] = ToolSpec(name, inspect.cleandoc(fn.__doc__ or ""), args, fn, per_bank, single_bank)
        return fn

    return register


async def require_bank(svc: Services, bank_id: str) -> None:
    if await svc.pool.fetchval("SELECT 1 FROM banks WHERE bank_id = $1", bank_id) is None:
        raise BankNotFound(bank_id)


def parse_id(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"{what} '{value}' not found") from None


def compact(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


# --- retain -------------------------------------------------------------------------------------


class RetainArgs(Args):
    content: str = Field(description="What to remember: a fact, a message, a conversation or a document")
    context: str | None = Field(None, description="What the content is, e.g. 'chat with Alice', 'preferences'")
    timestamp: str | None = Field(
        None, description="When it was said or happened (ISO 8601); relative dates in the text count from it"
    )
    tags: list[str] | None = Field(None, description="Tags to group and filter memories by, e.g. ['user:alice']")
    metadata: dict[str, str] | None = Field(None, description="String key-value pairs kept with the memory")
    document_id: str | None = Field(
        None, description="Groups the memory under a document; retaining the same id again replaces it"
    )


def _memory_items(args: RetainArgs) -> list[Any]:
    from engram.types import MemoryItem

    return [MemoryItem(content=args.content, context=args.context, timestamp=args.timestamp, tags=args.tags,
                       metadata=args.metadata, document_id=args.document_id)]


@tool("retain", RetainArgs)
async def retain(svc: Services, bank_id: str, args: RetainArgs) -> dict[str, Any]:
    """Store information in long-term memory, in the background: returns an operation id at once
    (see list_operations / get_operation). Use it whenever the user shares facts, preferences,
    events, plans, decisions or context worth remembering. Use sync_retain when you will recall it
    right away."""
    from engram.retain.prepare import prepare_items
    from engram.store import operations as ops
    from engram.store.writer_locks import ensure_bank_to_queue_into

    items = _memory_items(args)
    prepared = prepare_items(items, None)  # refuse bad input now, not later in the worker
    await ensure_bank_to_queue_into(svc.pool, bank_id)
    payload = {"items": [item.model_dump(mode="json", exclude_none=True) for item in items], "document_tags": None}
    op_id, _ = await ops.enqueue(
        svc.pool, bank_id, "retain", payload, items_count=1, document_id=prepared[0].document_id
    )
    svc.wake_worker()
    return {"success": True, "bank_id": bank_id, "operation_id": str(op_id), "status": "pending"}


@tool("sync_retain", RetainArgs)
async def sync_retain(svc: Services, bank_id: str, args: RetainArgs) -> dict[str, Any]:
    """Store information in long-term memory and wait until it is stored, so a recall right after
    finds it. Otherwise prefer retain, which does not wait."""
    from engram.retain.prepare import prepare_items
    from engram.retain.replanned import retain_replanned
    from engram.types import RetainResponse, TokenUsage

    outcome = await retain_replanned(svc, bank_id, prepare_items(_memory_items(args), None),
                                     import_wait=svc.settings.import_wait_seconds)
    usage = TokenUsage(input_tokens=outcome.usage.input_tokens, output_tokens=outcome.usage.output_tokens,
                       total_tokens=outcome.usage.input_tokens + outcome.usage.output_tokens)
    response = RetainResponse(success=True, bank_id=bank_id, items_count=outcome.items_count, async_=False,
                              usage=usage)
    return {**response.model_dump(mode="json", exclude_none=True, by_alias=True), "memories": len(outcome.unit_ids)}


# --- recall and reflect --------------------------------------------------------------------------


class RecallArgs(Args):
    query: str = Field(description="What to look for, in natural language")
    budget: Budget = Field("mid", description="How hard to search: low, mid or high")
    max_tokens: int = Field(4096, ge=1, description="Most tokens of memories to return")
    types: list[FactType] | None = Field(None, description="Only these kinds: world, experience, observation")
    tags: list[str] | None = Field(None, description="Only memories with these tags")
    tags_match: TagsMatch = Field("any", description="How tags match: any, all, any_strict, all_strict, exact")
    query_timestamp: str | None = Field(None, description="Search as if asked at this time (ISO 8601)")


@tool("recall", RecallArgs)
async def recall(svc: Services, bank_id: str, args: RecallArgs) -> dict[str, Any]:
    """Search long-term memory for what is relevant to a query: facts, experiences and observations,
    best first. Use it before answering questions about the user, their history, preferences or
    earlier conversations."""
    from engram.recall.pipeline import recall_payload
    from engram.types import RecallRequest

    if not args.query.strip():
        raise InvalidInput("query", "must not be empty")
    request = RecallRequest.model_validate(args.model_dump(exclude_none=True))
    return await recall_payload(svc, bank_id, request)


class ReflectArgs(Args):
    query: str = Field(description="The question or topic to think through")
    context: str | None = Field(None, description="Why the answer is needed, or other background")
    budget: Budget = Field("low", description="How much to search: low, mid or high")
    max_tokens: int = Field(4096, ge=1, description="Most tokens for the answer")
    response_schema: dict[str, Any] | None = Field(
        None, description="A JSON schema: the answer then also comes as structured_output"
    )
    tags: list[str] | None = Field(None, description="Only use memories with these tags")
    tags_match: TagsMatch = Field("any", description="How tags match: any, all, any_strict, all_strict, exact")


def _reflect_capability() -> Callable[..., Awaitable[Any]]:
    try:
        from engram import reflect as package
    except ImportError:
        raise ReflectUnavailable("reflect") from None
    run = getattr(package, "reflect", None)
    if run is None:
        try:
            from engram.reflect.agent import reflect as run
        except ImportError:
            raise ReflectUnavailable("reflect") from None
    return run


@tool("reflect", ReflectArgs)
async def reflect(svc: Services, bank_id: str, args: ReflectArgs) -> dict[str, Any]:
    """Answer a question by reasoning over everything the bank remembers (needs an LLM configured on
    the server). Use it for 'what should I do about X' or 'what patterns are there'; use recall for
    'what did I say about X'."""
    run = _reflect_capability()
    try:
        from engram.types import ReflectRequest
    except ImportError:
        raise ReflectUnavailable("reflect") from None
    response = await run(svc, bank_id, ReflectRequest.model_validate(args.model_dump(exclude_none=True)))
    return response.model_dump(mode="json", exclude_none=True)


# --- banks ---------------------------------------------------------------------------------------


class ListBanksArgs(Args):
    q: str | None = Field(None, description="Only banks whose id or name contains this")
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


@tool("list_banks", ListBanksArgs, per_bank=False, single_bank=False)
async def list_banks(svc: Services, _: None, args: ListBanksArgs) -> dict[str, Any]:
    """List the memory banks on this server (one per agent, user or purpose), with how many
    memories each holds."""
    from engram.store import banks as store

    rows, total = await store.list_banks(svc.pool, q=args.q, limit=args.limit, offset=args.offset)
    banks = [
        compact({"bank_id": r["bank_id"], "name": r["name"], "mission": r["mission"], "memories": r["fact_count"],
                 "created_at": iso(r["created_at"]), "last_write_at": iso(r["last_write_at"])})
        for r in rows
    ]
    return {"banks": banks, "total": total, "limit": args.limit, "offset": args.offset}


class CreateBankArgs(Args):
    name: str | None = Field(None, description="A human-readable name")
    mission: str | None = Field(None, description="Who the bank's agent is and what it is for")
    background: str | None = Field(None, description="Background about the bank's owner or purpose")


@tool("create_bank", CreateBankArgs, single_bank=False)
async def create_bank(svc: Services, bank_id: str, args: CreateBankArgs) -> dict[str, Any]:
    """Create a memory bank, or update the name, mission or background of an existing one. Banks are
    isolated: each has its own memories."""
    from engram.store import banks as store
    from engram.store.writer_locks import wait_for_bank_writers

    await wait_for_bank_writers(svc.pool, bank_id, svc.settings.import_wait_seconds, undone="changed")
    row = await store.upsert_bank(svc.pool, bank_id, name=args.name, mission=args.mission,
                                  background=args.background, config_updates={})
    return compact({"bank_id": bank_id, "name": row["name"], "mission": row["mission"],
                    "background": row["background"], "created_at": iso(row["created_at"])})


class NoArgs(Args):
    pass


@tool("get_bank_stats", NoArgs)
async def get_bank_stats(svc: Services, bank_id: str, _: NoArgs) -> dict[str, Any]:
    """Counts for a bank: memories by type, documents, links, background operations and
    consolidation still to do."""
    from engram.store import banks as store

    await require_bank(svc, bank_id)
    stats = await store.bank_stats(svc.pool, bank_id)
    links = await svc.link_counts.of(svc.pool, bank_id)
    by_type = dict(stats["by_type"])
    ops = dict(stats["ops"])
    return compact({
        "bank_id": bank_id,
        "total_memories": sum(by_type.values()),
        "memories_by_type": by_type,
        "total_documents": stats["documents"],
        "total_links": sum(links["by_link"].values()),
        "links_by_type": links["by_link"],
        "operations_by_status": ops,
        "pending_operations": ops.get("pending", 0) + ops.get("processing", 0),
        "failed_operations": ops.get("failed", 0),
        "pending_consolidation": stats["pending_consolidation"],
        "last_memory_write_at": iso(stats["last_write_at"]),
        "last_consolidated_at": iso(stats["last_consolidated_at"]),
    })


# --- memories, documents, entities ---------------------------------------------------------------


class ListMemoriesArgs(Args):
    type: FactType | None = Field(None, description="Only this kind: world, experience or observation")
    q: str | None = Field(None, description="Only memories whose text contains this")
    document_id: str | None = Field(None, description="Only memories of this document")
    tags: list[str] | None = Field(None, description="Only memories with these tags")
    tags_match: TagsMatch = Field("any", description="How tags match: any, all, any_strict, all_strict, exact")
    limit: int = Field(20, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def _memory(item: dict[str, Any]) -> dict[str, Any]:
    """A stored memory without the empty and bookkeeping fields an agent has no use for."""
    skip = {"invalidation_reason", "invalidated_at", "edited_at", "consolidation_failed_at", "consolidation_error"}
    return {k: v for k, v in item.items() if k not in skip and v not in (None, "", [], {})}


@tool("list_memories", ListMemoriesArgs)
async def list_memories(svc: Services, bank_id: str, args: ListMemoriesArgs) -> dict[str, Any]:
    """Browse stored memories, newest first, optionally filtered by type, text, document or tags."""
    from engram.store import memories as store

    await require_bank(svc, bank_id)
    filters = store.ListFilters(fact_type=args.type, q=args.q, document_id=args.document_id, tags=args.tags,
                                tags_match=args.tags_match)
    rows, total = await store.list_units(svc.pool, bank_id, filters, limit=args.limit, offset=args.offset)
    return {"items": [_memory(store.list_item(r)) for r in rows], "total": total, "limit": args.limit,
            "offset": args.offset}


class GetMemoryArgs(Args):
    memory_id: str = Field(description="The memory's id (from recall or list_memories)")


@tool("get_memory", GetMemoryArgs)
async def get_memory(svc: Services, bank_id: str, args: GetMemoryArgs) -> dict[str, Any]:
    """One memory with all it knows: text, type, dates, entities, tags, document, evidence."""
    from engram.store import memories as store

    row = await store.get_unit(svc.pool, bank_id, parse_id(args.memory_id, "memory"))
    if row is None:
        raise NotFound(f"memory '{args.memory_id}' not found in bank '{bank_id}'")
    return _memory(store.detail_item(row))


class DeleteDocumentArgs(Args):
    document_id: str = Field(description="The document to delete")


@tool("delete_document", DeleteDocumentArgs)
async def delete_document(svc: Services, bank_id: str, args: DeleteDocumentArgs) -> dict[str, Any]:
    """Delete a document and every memory that came from it."""
    from engram.consolidate.trigger import after_memory_change
    from engram.store import documents as store

    deleted = await store.delete_document(svc.pool, bank_id, args.document_id,
                                          import_wait=svc.settings.import_wait_seconds)
    if deleted is None:
        raise NotFound(f"document '{args.document_id}' not found in bank '{bank_id}'")
    await after_memory_change(svc, bank_id)
    return {"success": True, "document_id": args.document_id, "memory_units_deleted": deleted}


class ListEntitiesArgs(Args):
    q: str | None = Field(None, description="Only entities whose name or a mention contains this")
    sort: Literal["mentions", "name", "recent"] = Field("mentions", description="mentions, name or recent")
    limit: int = Field(50, ge=1, le=1000)
    offset: int = Field(0, ge=0)


@tool("list_entities", ListEntitiesArgs)
async def list_entities(svc: Services, bank_id: str, args: ListEntitiesArgs) -> dict[str, Any]:
    """The people, places, organisations and things the bank's memories mention, most mentioned
    first."""
    from engram.store import entity_reads as store

    await require_bank(svc, bank_id)
    rows, total = await store.list_entities(svc.pool, bank_id, q=args.q, tags=None, tags_match="any",
                                            sort=args.sort, limit=args.limit, offset=args.offset)
    items = [
        {"id": str(r["id"]), "name": r["canonical_name"], "mentions": r["mention_count"],
         "first_seen": iso(r["first_seen"]), "last_seen": iso(r["last_seen"])}
        for r in rows
    ]
    return {"items": items, "total": total, "limit": args.limit, "offset": args.offset}


# --- operations ----------------------------------------------------------------------------------


class ListOperationsArgs(Args):
    status: OperationStatus | None = Field(None, description="pending, processing, completed, failed or cancelled")
    type: str | None = Field(None, description="Only this kind, e.g. retain or consolidation")
    limit: int = Field(20, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def _operation(row: Any) -> dict[str, Any]:
    return compact({
        "operation_id": str(row["id"]), "type": row["operation_type"], "status": row["status"],
        "items_count": row["items_count"], "document_id": row["document_id"],
        "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
        "completed_at": iso(row["completed_at"]), "error_message": row["error_message"],
    })


@tool("list_operations", ListOperationsArgs)
async def list_operations(svc: Services, bank_id: str, args: ListOperationsArgs) -> dict[str, Any]:
    """Background work of the bank (retains sent with retain, consolidation, ...), newest first, with
    its status."""
    from engram.store import operations as store

    await require_bank(svc, bank_id)
    rows, total = await store.list_for_bank(svc.pool, bank_id, status=args.status, operation_type=args.type,
                                            limit=args.limit, offset=args.offset)
    return {"operations": [_operation(r) for r in rows], "total": total, "limit": args.limit,
            "offset": args.offset}


class GetOperationArgs(Args):
    operation_id: str = Field(description="The id retain returned")


@tool("get_operation", GetOperationArgs)
async def get_operation(svc: Services, bank_id: str, args: GetOperationArgs) -> dict[str, Any]:
    """The status of one background operation, with its result or the reason it failed."""
    from engram.store import operations as store

    row = await store.get(svc.pool, bank_id, parse_id(args.operation_id, "operation"))
    if row is None:
        raise NotFound(f"operation '{args.operation_id}' not found in bank '{bank_id}'")
    return compact({**_operation(row), "result": row["result"]})


# --- mental models -------------------------------------------------------------------------------


class ListMentalModelsArgs(Args):
    tags: list[str] | None = Field(None, description="Only models with these tags")
    tags_match: TagsMatch = Field("any", description="How tags match: any, all, any_strict, all_strict, exact")
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def _mental_model_store() -> Any:
    try:
        from engram.store import reflect_state
    except ImportError:
        raise ReflectUnavailable("mental models") from None
    return reflect_state


def _mental_model(row: Any, *, with_content: bool) -> dict[str, Any]:
    body = {
        "id": row["id"], "name": row["name"], "source_query": row["source_query"], "tags": list(row["tags"]),
        "last_refreshed_at": iso(row["last_refreshed_at"]), "is_stale": row.get("is_stale"),
    }
    if with_content:
        body["content"] = row["content"]
    return compact(body)


@tool("list_mental_models", ListMentalModelsArgs)
async def list_mental_models(svc: Services, bank_id: str, args: ListMentalModelsArgs) -> dict[str, Any]:
    """The bank's mental models: stored, kept-fresh answers to standing questions (e.g. 'who is on
    the team'). Read one with get_mental_model."""
    store = _mental_model_store()
    await require_bank(svc, bank_id)
    rows, total = await store.list_mental_models(svc.pool, bank_id, tags=args.tags, tags_match=args.tags_match,
                                                 limit=args.limit, offset=args.offset)
    return {"items": [_mental_model(r, with_content=False) for r in rows], "total": total}


class GetMentalModelArgs(Args):
    mental_model_id: str = Field(description="The model's id (from list_mental_models)")


@tool("get_mental_model", GetMentalModelArgs)
async def get_mental_model(svc: Services, bank_id: str, args: GetMentalModelArgs) -> dict[str, Any]:
    """One mental model with its current content."""
    store = _mental_model_store()
    row = await store.get_mental_model(svc.pool, bank_id, args.mental_model_id)
    if row is None:
        raise NotFound(f"mental model '{args.mental_model_id}' not found in bank '{bank_id}'")
    return _mental_model(row, with_content=True)
