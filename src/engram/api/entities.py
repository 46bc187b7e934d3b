"""Entities: the people, places and things of a bank, their mentions and their co-occurrence graph;
and the memory graph (facts and the links between them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from engram.api import choices
from engram.api.choices import choice, one_of
from engram.api.deps import parse_uuid, require_bank, services
from engram.entity_observations.engine import RECENT_FACTS
from engram.errors import NotFound
from engram.recall.rows import iso
from engram.retain.entity_kinds import ENTITY_TYPES
from engram.services import Services
from engram.store import entity_reads as store
from engram.store.entity_summaries import Summary, summaries

router = APIRouter(prefix="/v1/default/banks/{bank_id}", tags=["Entities"])
FACTS_PER_ENTITY = 50
PARTNERS_PER_ENTITY = 25
# A graph answer holds at most this many edges (the strongest first): nodes are bounded by `limit`,
# but edges grow with the square of the nodes.
MAX_GRAPH_EDGES = 5000


def _check_match(tags_match: str) -> None:
    one_of(tags_match, choices.TAGS_MATCH, "tags_match")


def _entity_item(row: Any) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "canonical_name": row["canonical_name"],
        "mention_count": row["mention_count"],
        "first_seen": iso(row["first_seen"]),
        "last_seen": iso(row["last_seen"]),
        "metadata": {**(row["metadata"] or {}), "entity_kind": row["entity_kind"], "entity_type": row["entity_type"]},
    }


def summary_item(summary: Summary) -> dict[str, Any]:
    return {"text": summary.text, "mentioned_at": iso(summary.generated_at), "source": "entity",
            "generated_at": iso(summary.generated_at), "stale": summary.stale}


@router.get("/entities")
async def list_entities(
    bank_id: str,
    q: str | None = Query(None, description="search by name or alias"),
    sort: str = choice("mentions", choices.ENTITY_SORTS, description="mentions | name | recent"),
    tags: list[str] | None = Query(None),
    tags_match: str = choice("any", choices.TAGS_MATCH),
    entity_type: str | None = Query(None, description="person | organisation | place | product | concept"),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=2**31 - 1),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    _check_match(tags_match)
    one_of(sort, choices.ENTITY_SORTS, "sort")
    if entity_type is not None:
        one_of(entity_type, ENTITY_TYPES, "entity_type")
    await require_bank(svc, bank_id)
    rows, total = await store.list_entities(
        svc.pool, bank_id, q=q, tags=tags, tags_match=tags_match, sort=sort, limit=limit, offset=offset,
        entity_type=entity_type,
    )
    return {"items": [_entity_item(r) for r in rows], "total": total, "limit": limit, "offset": offset}


@router.get("/entities/graph")
async def entity_graph(
    bank_id: str,
    limit: int = Query(1000, ge=1, le=10000),
    min_count: int = Query(1, ge=1, le=2**31 - 1),
    tags: list[str] | None = Query(None),
    tags_match: str = choice("any", choices.TAGS_MATCH),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    await require_bank(svc, bank_id)
    _check_match(tags_match)
    nodes, edges, total_nodes, total_edges = await store.entity_graph(
        svc.pool, bank_id, limit=limit, min_count=min_count, tags=tags, tags_match=tags_match,
        edge_limit=MAX_GRAPH_EDGES,
    )
    return {
        "nodes": [{"data": {"id": str(n["id"]), "label": n["canonical_name"], "mentionCount": n["mention_count"]}}
                  for n in nodes],
        "edges": [
            {"data": {"id": f"{e['entity_a']}-{e['entity_b']}", "source": str(e["entity_a"]),
                      "target": str(e["entity_b"]), "linkType": "cooccurrence", "weight": e["count"],
                      "lastCooccurred": iso(e["last_cooccurred"])}}
            for e in edges
        ],
        "total_entities": total_nodes,
        "total_edges": total_edges,
        "limit": limit,
    }


@router.get("/entities/{entity_id}")
async def get_entity(
    bank_id: str,
    entity_id: str,
    tags: list[str] | None = Query(None),
    tags_match: str = choice("any", choices.TAGS_MATCH),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    _check_match(tags_match)
    row = await store.get_entity(svc.pool, bank_id, parse_uuid(entity_id, "entity"))
    if row is None:
        raise NotFound(f"entity '{entity_id}' not found in bank '{bank_id}'")
    facts = await store.entity_facts(svc.pool, row["id"], tags=tags, tags_match=tags_match, limit=FACTS_PER_ENTITY)
    partners = await store.cooccurring(svc.pool, row["id"], PARTNERS_PER_ENTITY)
    summary = (await summaries(svc.pool, [row["id"]], RECENT_FACTS)).get(row["id"])
    derived = [{"text": f["text"], "mentioned_at": iso(f["mentioned_at"]), "source": "consolidation"}
               for f in facts if f["fact_type"] == "observation"]
    return {
        **_entity_item(row),
        # The entity's own observation (entities.md) first, then consolidation observations citing its facts.
        "observations": ([summary_item(summary)] if summary else []) + derived,
        "aliases": list(row["aliases"]),
        "facts": [
            {"id": str(f["id"]), "text": f["text"], "type": f["fact_type"], "mention": f["mention"],
             "mentioned_at": iso(f["mentioned_at"]), "occurred_start": iso(f["occurred_start"]),
             "tags": list(f["tags"]), "document_id": f["document_id"]}
            for f in facts
            if f["fact_type"] != "observation"
        ],
        "cooccurring": [
            {"entity_id": str(p["id"]), "canonical_name": p["canonical_name"], "count": p["count"],
             "last_cooccurred": iso(p["last_cooccurred"])}
            for p in partners
        ],
    }


@router.get("/graph")
async def memory_graph(
    bank_id: str,
    type: str | None = choice(None, choices.FACT_TYPES),
    limit: int = Query(1000, ge=1, le=10000),
    q: str | None = None,
    tags: list[str] | None = Query(None),
    tags_match: str = choice("all_strict", choices.TAGS_MATCH),
    document_id: str | None = None,
    chunk_id: str | None = None,
    svc: Services = Depends(services),
) -> dict[str, Any]:
    _check_match(tags_match)
    one_of(type, choices.FACT_TYPES, "type")
    await require_bank(svc, bank_id)
    units, links, total = await store.memory_graph(
        svc.pool, bank_id, fact_type=type, q=q, tags=tags, tags_match=tags_match, document_id=document_id,
        chunk_id=chunk_id, limit=limit, edge_limit=MAX_GRAPH_EDGES,
    )
    rows = []
    nodes = []
    for u in units:
        entities = ", ".join(u["entity_names"])
        date = iso(u["occurred_start"] or u["mentioned_at"] or u["created_at"])
        nodes.append({"data": {"id": str(u["id"]), "label": u["text"][:60], "text": u["text"], "date": date or "",
                               "context": u["context"] or "", "entities": entities}})
        rows.append({
            "id": str(u["id"]), "text": u["text"], "context": u["context"] or "",
            "occurred_start": iso(u["occurred_start"]), "occurred_end": iso(u["occurred_end"]),
            "mentioned_at": iso(u["mentioned_at"]), "date": date, "entities": entities,
            "document_id": u["document_id"], "chunk_id": u["chunk_id"], "fact_type": u["fact_type"],
            "tags": list(u["tags"]), "created_at": iso(u["created_at"]), "proof_count": u["proof_count"],
        })
    edges = [
        {"data": {"id": f"{link['source']}-{link['target']}-{link['link_type']}-{index}",
                  "source": str(link["source"]), "target": str(link["target"]), "linkType": link["link_type"],
                  "weight": float(link["weight"]), "entityName": link["entity_name"]}}
        for index, link in enumerate(links)
    ]
    return {"nodes": nodes, "edges": edges, "table_rows": rows, "total_units": total, "limit": limit}
