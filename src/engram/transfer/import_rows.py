"""Archive records (Hindsight's or Engram's own) turned into the rows Engram stores: pure
conversions, checked, with nothing read or written."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engram.store import attachments as attachment_store
from engram.store import facts_write as fw
from engram.store import transfer_writes as tw
from engram.store.unit_ids import new_unit_id
from engram.transfer.archive import Archive, decoded
from engram.transfer.fact_places import FactPlaces, place_of

FACT_TYPES = ("world", "experience")


def when(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class UnitPlan:
    row: fw.UnitRow
    names: list[str]
    labels: list[str]
    lifecycle: tw.UnitLifecycle


@dataclass
class DocumentRows:
    source: dict[str, Any]
    source_id: str
    document_id: str
    chunks: list[tuple[str, int, str, str]] = field(default_factory=list)
    units: list[UnitPlan] = field(default_factory=list)
    causal: list[tuple[uuid.UUID, uuid.UUID]] = field(default_factory=list)
    attachments: list[attachment_store.NewAttachment] = field(default_factory=list)
    chunk_ids: dict[int, str] = field(default_factory=dict)


def _unit(fact: dict[str, Any], document_id: str, chunk_id: str | None) -> UnitPlan:
    unit_id = new_unit_id()
    said = when(fact.get("mentioned_at"))
    start = when(fact.get("occurred_start"))
    if said is None and start is None:
        said = when(fact.get("event_date"))  # Hindsight's fallback date of a fact
    row = fw.UnitRow(
        id=unit_id, document_id=document_id, chunk_id=chunk_id, text=str(fact["text"]), context=fact.get("context"),
        fact_type=fact.get("fact_type") if fact.get("fact_type") in FACT_TYPES else "world",
        fact_kind=fact.get("fact_kind"), embedding=None, occurred_start=start,
        occurred_end=when(fact.get("occurred_end")),
        mentioned_at=said, tags=[str(t) for t in fact.get("tags") or []],
        metadata={str(k): str(v) for k, v in (fact.get("metadata") or {}).items()},
        observation_scopes=fact.get("observation_scopes"), lead_in=fact.get("lead_in"),
        created_at=when(fact.get("created_at")),
        state=fact.get("state") if fact.get("state") in ("valid", "invalidated") else "valid",
        invalidation_reason=fact.get("invalidation_reason"), invalidated_at=when(fact.get("invalidated_at")),
        edited_at=when(fact.get("edited_at")),
    )
    lifecycle = tw.UnitLifecycle(
        id=unit_id, consolidated_at=when(fact.get("consolidated_at")),
        consolidation_failed_at=when(fact.get("consolidation_failed_at")),
        consolidation_error=fact.get("consolidation_error"),
    )
    names = [str(n) for n in fact.get("entities") or [] if str(n).strip()]
    return UnitPlan(row, names, [str(n) for n in fact.get("labels") or []], lifecycle)


def document_rows(doc: dict[str, Any], target_id: str) -> DocumentRows:
    out = DocumentRows(source=doc, source_id=doc["id"], document_id=target_id)
    for chunk in doc.get("chunks") or []:
        chunk_id = uuid.uuid4().hex
        text = str(chunk["chunk_text"])
        out.chunk_ids[int(chunk["chunk_index"])] = chunk_id
        out.chunks.append((chunk_id, int(chunk["chunk_index"]), text, hashlib.sha256(text.encode()).hexdigest()))
    facts = doc.get("facts") or []
    out.units = [_unit(f, target_id, out.chunk_ids.get(f.get("chunk_index"))) for f in facts]
    for unit, fact in zip(out.units, facts):
        for relation in fact.get("causal_relations") or []:
            target = relation.get("target_fact_index")
            if isinstance(target, int) and 0 <= target < len(out.units) and out.units[target] is not unit:
                out.causal.append((unit.row.id, out.units[target].row.id))
    return out


def _resolve(sources: list[dict[str, Any]], places: FactPlaces) -> list[uuid.UUID]:
    found = [places.get((s.get("document_id"), s.get("fact_index"))) for s in sources or []]
    return list(dict.fromkeys(f for f in found if f is not None))


def _evidence(items: list[dict[str, Any]], places: FactPlaces) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        fact = places.get((item.get("document_id"), item.get("fact_index")))
        if fact is not None:
            out.append({"fact_id": str(fact), "quote": item.get("quote") or ""})
    return out


def observation_rows(
    observations: list[dict[str, Any]], places: FactPlaces
) -> tuple[list[tw.ObservationRow], list[tuple], int]:
    """Observations whose sources are in the import (others are dropped and counted), with history."""
    out, history, dropped = [], [], 0
    for obs in observations:
        sources = _resolve(obs.get("sources") or [], places)
        if not sources:
            dropped += 1
            continue
        obs_id = new_unit_id()
        out.append(tw.ObservationRow(
            id=obs_id, text=str(obs["text"]), tags=[str(t) for t in obs.get("tags") or []], vector=None,
            sources=sources, evidence=_evidence(obs.get("evidence") or [], places),
            proof_count=int(obs.get("proof_count") or len(sources)), occurred_start=when(obs.get("occurred_start")),
            occurred_end=when(obs.get("occurred_end")), mentioned_at=when(obs.get("mentioned_at")),
            created_at=when(obs.get("created_at")), observation_scopes=obs.get("observation_scopes"), token_count=0,
        ))
        for past in obs.get("history") or []:
            history.append((obs_id, str(past["text"]), _resolve(past.get("sources") or [], places),
                            _evidence(past.get("evidence") or [], places), past.get("reason"),
                            when(past.get("changed_at"))))
    return out, history, dropped


def bank_profile(archive: Archive) -> dict[str, Any]:
    bank = archive.banks[0] if archive.banks else {}
    return {"name": bank.get("name") or None, "mission": bank.get("mission") or None,
            "background": bank.get("background") or None}


def bank_config(archive: Archive) -> tuple[dict[str, Any], list[str]]:
    """The bank's config overrides Engram understands (each checked as PATCH …/config would), and the
    keys it had to leave out."""
    from engram.bank_config import validate_updates
    from engram.errors import InvalidInput

    bank = archive.banks[0] if archive.banks else {}
    raw = dict(decoded(bank.get("engram_config") or bank.get("config")) or {})
    disposition = decoded(bank.get("disposition")) or {}
    if isinstance(disposition, dict) and "engram_config" not in bank:
        traits = ("empathy", "literalism", "skepticism")
        raw.update({f"disposition_{k}": v for k, v in disposition.items() if k in traits})
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in raw.items():
        try:
            kept.update(validate_updates({key: value}))
        except InvalidInput:
            dropped.append(key)
    return kept, sorted(dropped)


def mental_models(archive: Archive) -> list[dict[str, Any]]:
    from engram.types import MentalModelTrigger

    out = []
    for row in archive.table("mental_models"):
        model = dict(row)
        try:
            trigger = MentalModelTrigger.model_validate(decoded(row.get("trigger")) or {})
            model["trigger"] = trigger.model_dump(mode="json", exclude_none=True)
        except ValueError:
            model["trigger"] = {}
        model["reflect_response"] = decoded(row.get("reflect_response"))
        for key in ("last_refreshed_at", "last_memory_seen_at", "last_refresh_failed_at", "created_at"):
            model[key] = when(row.get(key))
        out.append(model)
    return out


def embed_models(models: list[dict[str, Any]]) -> list[Any]:
    if not models:
        return []
    from engram.models.embedder import embedder

    # a standing question, matched against questions: the query side, as mental_models.py embeds it
    return embedder().embed_queries([f"{m['name']}: {m['source_query']}" for m in models])


def mental_model_history(archive: Archive) -> list[tuple]:
    return [(str(r["mental_model_id"]), r.get("content"), when(r.get("refreshed_at")), when(r.get("changed_at")))
            for r in archive.table("mental_model_history")]


def directives(archive: Archive) -> list[dict[str, Any]]:
    out = []
    for row in archive.table("directives"):
        try:
            directive_id = uuid.UUID(str(row.get("id")))
        except ValueError:
            directive_id = uuid.uuid4()
        out.append({**row, "id": directive_id, "created_at": when(row.get("created_at")),
                    "updated_at": when(row.get("updated_at"))})
    return out


def attachments_by_document(archive: Archive) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for meta in archive.attachments:
        grouped.setdefault(meta["document_id"], []).append(meta)
    return grouped


def attachment_rows(metas: list[dict[str, Any]], doc: DocumentRows) -> list[attachment_store.NewAttachment]:
    return [
        attachment_store.NewAttachment(
            id=uuid.uuid4(), document_id=doc.document_id, kind=m.get("kind") or "file",
            media_type=m.get("media_type") or "application/octet-stream", data=m["data"],
            role=m.get("role") or "content", block_index=m.get("block_index"),
            chunk_id=doc.chunk_ids.get(m.get("chunk_index")), filename=m.get("filename"),
            text_offset=m.get("text_offset"),
        )
        for m in metas
    ]


def link_rows(links: list[Any], places: FactPlaces) -> list[tuple[str, str, str, float]]:
    """An Engram archive's links between facts, onto the imported facts (links to skipped ones, and
    links whose ends are no place, drop)."""
    out = []
    for link in links:
        if not isinstance(link, dict):
            continue
        ends = place_of(link.get("from")), place_of(link.get("to"))
        a, b = (places.id_text(end) if end else None for end in ends)
        if a and b and link.get("link_type") in ("temporal", "semantic", "causal"):
            out.append((a, b, link["link_type"], float(link.get("weight") or 0)))
    return out
