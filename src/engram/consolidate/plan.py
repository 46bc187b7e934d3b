"""Checking the LLM's consolidation answer against what it was shown, and turning it into writes.

Actions must cite the batch's facts; updates and deletes may only touch observations shown for this
scope; duplicate creates are dropped. A quote is stored as the cited fact's own words: a quote found
in the fact up to case and spacing is replaced by the fact's matching substring, and one not found at
all by the fact's whole text, so evidence is always exact."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from engram.consolidate.prompt import ConsolidationActions, Evidence

_SPACE = re.compile(r"\s+")


@dataclass
class PlannedWrite:
    """A create (observation_id None) or a rewrite of an existing observation."""

    text: str
    sources: list[uuid.UUID]
    evidence: list[dict[str, str]]
    observation_id: uuid.UUID | None = None
    reason: str | None = None
    vector: Any = None


@dataclass
class Plan:
    writes: list[PlannedWrite] = field(default_factory=list)
    deletes: dict[uuid.UUID, uuid.UUID | None] = field(default_factory=dict)  # observation → merged into
    dropped: int = 0  # actions refused by validation


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def exact_quote(quote: str, fact_text: str) -> str:
    """The fact's own words for `quote` (matched ignoring case and runs of whitespace), else the
    fact's whole text."""
    words = quote.split()
    if not words:
        return fact_text
    found = re.search(r"\s+".join(re.escape(word) for word in words), fact_text, re.IGNORECASE)
    return found.group(0) if found else fact_text


def _evidence(items: list[Evidence], facts: dict[str, Any]) -> list[dict[str, str]]:
    cited: dict[tuple[str, str], dict[str, str]] = {}
    for item in items:
        fact = facts.get(item.fact.strip())
        if fact is None:
            continue
        quote = exact_quote(item.quote, fact["text"])
        cited.setdefault((str(fact["id"]), quote), {"fact_id": str(fact["id"]), "quote": quote})
    return list(cited.values())


def merge_evidence(*groups: list[dict[str, str]]) -> list[dict[str, str]]:
    merged: dict[tuple[str, str], dict[str, str]] = {}
    for group in groups:
        for item in group:
            merged.setdefault((item["fact_id"], item["quote"]), item)
    return list(merged.values())


def build_plan(actions: ConsolidationActions, facts: dict[str, Any], observations: dict[str, Any]) -> Plan:
    """facts / observations: handle ('F1', 'O1') → database row shown to the LLM."""
    plan = Plan()
    seen_texts: set[str] = set()
    updated: set[uuid.UUID] = set()
    for update in actions.updates:
        target = observations.get(update.observation.strip())
        evidence = _evidence(update.evidence, facts)
        if target is None or not evidence or not update.text.strip() or target["id"] in updated:
            plan.dropped += 1
            continue
        updated.add(target["id"])
        all_evidence = merge_evidence(list(target["evidence"] or []), evidence)
        sources = list(dict.fromkeys([*target["source_memory_ids"], *(uuid.UUID(e["fact_id"]) for e in evidence)]))
        plan.writes.append(PlannedWrite(update.text.strip(), sources, all_evidence, target["id"], update.reason))
        seen_texts.add(_normal(update.text))
    for create in actions.creates:
        evidence = _evidence(create.evidence, facts)
        if not evidence or not create.text.strip() or _normal(create.text) in seen_texts:
            plan.dropped += 1
            continue
        seen_texts.add(_normal(create.text))
        sources = list(dict.fromkeys(uuid.UUID(e["fact_id"]) for e in evidence))
        plan.writes.append(PlannedWrite(create.text.strip(), sources, evidence))
    for delete in actions.deletes:
        target = observations.get(delete.observation.strip())
        if target is None or target["id"] in updated:
            plan.dropped += 1
            continue
        into = observations.get((delete.merged_into or "").strip())
        plan.deletes[target["id"]] = into["id"] if into is not None and into["id"] != target["id"] else None
    return plan
