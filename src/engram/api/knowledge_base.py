"""The knowledge base of a bank: the tree, folders, pages (a page is a mental model in the tree, its
content generated asynchronously like any mental model's), a page as markdown, renaming, moving and
deleting nodes (a subtree at once, with its pages' mental models), search and a markdown export."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from engram import knowledge_base as kb
from engram.api import choices, mental_models
from engram.api.choices import choice, one_of
from engram.api.deps import require_bank, services
from engram.errors import InvalidInput, NotFound
from engram.recall.rows import iso
from engram.recall.scoring import fuse_rrf
from engram.services import Services
from engram.store import knowledge_base as store
from engram.store.reflect_state import _vector
from engram.tag_match import parse_tag_groups, passes
from engram.types import CreateMentalModelRequest, MentalModelTrigger, UpdateMentalModelRequest

router = APIRouter(prefix="/v1/default/banks/{bank_id}/knowledge-base", tags=["Knowledge Base"])
MAX_NAME = 200


class CreateFolderRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr
    parent_id: StrictStr | None = None


class CreatePageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr
    source_query: StrictStr = Field(min_length=1)
    parent_id: StrictStr | None = None
    tags: list[StrictStr] | None = None
    max_tokens: int | None = Field(None, ge=1, le=2**31 - 1)
    trigger: MentalModelTrigger | None = None


class UpdateNodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr | None = None
    parent_id: StrictStr | None = None  # sent as null: to the root; left out: stays
    source_query: StrictStr | None = None
    tags: list[StrictStr] | None = None
    max_tokens: int | None = Field(None, ge=1, le=2**31 - 1)
    trigger: MentalModelTrigger | None = None


def _name(name: str) -> str:
    name = name.strip()
    if not name:
        raise InvalidInput("name", "must not be empty")
    if len(name) > MAX_NAME:
        raise InvalidInput("name", f"at most {MAX_NAME} characters")
    return name


async def _folder(svc: Services, bank_id: str, parent_id: str | None) -> str | None:
    if parent_id is None:
        return None
    row = await store.get_node(svc.pool, bank_id, parent_id)
    if row is None or row["kind"] != "folder":
        raise InvalidInput("parent_id", f"no folder '{parent_id}' in bank '{bank_id}'")
    return parent_id


async def _node(svc: Services, bank_id: str, node_id: str) -> Any:
    row = await store.get_node(svc.pool, bank_id, node_id)
    if row is None:
        raise NotFound(f"knowledge-base node '{node_id}' not found in bank '{bank_id}'")
    return row


@router.get("/tree")
async def get_tree(bank_id: str, tags: list[str] | None = Query(None),
                   tags_match: str = choice("any", choices.TAGS_MATCH), tag_groups: str | None = None,
                   svc: Services = Depends(services)) -> dict[str, Any]:
    """`tags` / `tags_match` / `tag_groups` keep the pages they match, as in recall (and the folders)."""
    one_of(tags_match, choices.TAGS_MATCH, "tags_match")
    groups = parse_tag_groups(tag_groups)
    await require_bank(svc, bank_id)
    rows = await store.list_nodes(svc.pool, bank_id)
    rows = [r for r in rows if r["kind"] == "folder" or passes(r["tags"], tags, tags_match, groups)]
    return {"roots": kb.tree(rows)}


@router.post("/folders", status_code=201)
async def create_folder(bank_id: str, body: CreateFolderRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    node_id = uuid.uuid4().hex
    await store.insert_node(svc.pool, bank_id, node_id, "folder", _name(body.name),
                            await _folder(svc, bank_id, body.parent_id))
    return kb.node(await _node(svc, bank_id, node_id))


@router.post("/pages", status_code=201)
async def create_page(bank_id: str, body: CreatePageRequest, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    name, parent = _name(body.name), await _folder(svc, bank_id, body.parent_id)
    node_id = uuid.uuid4().hex
    request = CreateMentalModelRequest(id=f"kb-{node_id}", name=name, source_query=body.source_query,
                                       tags=body.tags or [], max_tokens=body.max_tokens or 2048,
                                       trigger=body.trigger or MentalModelTrigger())
    created = await mental_models.create_model(bank_id, request, svc)  # 400 with no LLM, before anything is kept
    await store.insert_node(svc.pool, bank_id, node_id, "page", name, parent, created["mental_model_id"])
    return {"page_id": node_id, "mental_model_id": created["mental_model_id"], "operation_id": created["operation_id"]}


@router.get("/pages/{page_id}")
async def get_page(bank_id: str, page_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    row = await _node(svc, bank_id, page_id)
    if row["kind"] != "page":
        raise NotFound(f"'{page_id}' is a folder, not a page")
    return kb.page(row)


@router.patch("/nodes/{node_id}")
async def update_node(bank_id: str, node_id: str, body: UpdateNodeRequest,
                      svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    row = await _node(svc, bank_id, node_id)
    given = body.model_fields_set
    name = _name(body.name) if body.name is not None else None
    move = "parent_id" in given
    parent = await _folder(svc, bank_id, body.parent_id) if move else None
    if move and parent is not None and parent in {r["id"] for r in await store.subtree(svc.pool, bank_id, node_id)}:
        raise InvalidInput("parent_id", "cannot move a folder into itself or one of its sub-folders")
    page_fields = {"source_query", "tags", "max_tokens", "trigger"} & given
    if page_fields and row["kind"] != "page":
        raise InvalidInput(sorted(page_fields)[0], "only pages have it; this node is a folder")
    await store.update_node(svc.pool, bank_id, node_id, name, parent, move)
    if row["kind"] == "page" and (page_fields or name):
        changes = body.model_dump(include=page_fields) | ({"name": name} if name else {})
        await mental_models.update_model(bank_id, row["mental_model_id"], UpdateMentalModelRequest(**changes), svc)
    return kb.node(await _node(svc, bank_id, node_id))


@router.delete("/nodes/{node_id}")
async def delete_node(bank_id: str, node_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    await _node(svc, bank_id, node_id)
    below = await store.subtree(svc.pool, bank_id, node_id)
    async with svc.pool.acquire() as conn, conn.transaction():
        await store.delete_nodes(conn, bank_id, [r["id"] for r in below],
                                 [r["mental_model_id"] for r in below if r["mental_model_id"]])
    return {"success": True, "deleted_count": len(below)}


@router.get("/search")
async def search(bank_id: str, q: str = Query(min_length=1), limit: int = Query(10, ge=1, le=50),
                 tags: list[str] | None = Query(None), tags_match: str = choice("any", choices.TAGS_MATCH),
                 tag_groups: str | None = None, svc: Services = Depends(services)) -> dict[str, Any]:
    """BM25-style full-text rank and embedding similarity over pages (name and content), fused by RRF;
    the tag filters as in recall."""
    from engram.models.embedder import embed_query

    one_of(tags_match, choices.TAGS_MATCH, "tags_match")
    groups = parse_tag_groups(tag_groups)
    await require_bank(svc, bank_id)
    vector = await asyncio.to_thread(embed_query, q)
    keyword = await store.search_keyword(svc.pool, bank_id, q, 100)
    semantic = await store.search_vector(svc.pool, bank_id, _vector(vector), 100)
    fused = fuse_rrf({"kb_keyword": [(r["id"], float(r["rank"])) for r in keyword],
                      "kb_semantic": [(r["id"], -float(i)) for i, r in enumerate(semantic)]})
    rows = {r["id"]: r for r in await store.list_nodes(svc.pool, bank_id)}
    fused = {k: v for k, v in fused.items() if passes(rows[k]["tags"], tags, tags_match, groups)}
    best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]
    results = [{"id": key, "name": rows[key]["name"], "mental_model_id": rows[key]["mental_model_id"],
                "source_query": rows[key]["source_query"], "snippet": (rows[key]["content"] or "")[:300],
                "score": round(score, 6), "updated_at": iso(rows[key]["model_updated_at"])} for key, score in best]
    return {"results": results, "total": len(fused)}


@router.get("/export")
async def export(bank_id: str, svc: Services = Depends(services)) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    return {"files": kb.bundle(await store.list_nodes(svc.pool, bank_id))}
