"""The consolidation LLM task: new facts next to the observations they may touch, in, and a list of
creates / updates / deletes with cited evidence, out. Observations and facts are shown with short
handles (O1, F1) so the answer can cite them without copying ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

DEFAULT_RULES = """Keep durable, specific knowledge that stays true over time: preferences, skills, relationships,
habits, recurring patterns, long-lived states and commitments. Ignore greetings, filler and ephemeral
state that will not matter later."""


class Evidence(BaseModel):
    fact: str = Field(description="Handle of the new fact supporting this, e.g. 'F2'")
    quote: str = Field(description="The exact words of that fact that support the observation")


class CreateAction(BaseModel):
    text: str = Field(description="The new observation: one self-contained belief about one facet")
    evidence: list[Evidence]


class UpdateAction(BaseModel):
    observation: str = Field(description="Handle of the observation to rewrite, e.g. 'O1'")
    text: str = Field(description="The full new wording; for a change of state, say what changed and when")
    evidence: list[Evidence]
    reason: str | None = None


class DeleteAction(BaseModel):
    observation: str
    merged_into: str | None = Field(None, description="Handle of the observation that now covers it, if any")
    reason: str | None = None


class ConsolidationActions(BaseModel):
    creates: list[CreateAction] = Field(default_factory=list)
    updates: list[UpdateAction] = Field(default_factory=list)
    deletes: list[DeleteAction] = Field(default_factory=list)


class MergeDecision(BaseModel):
    decision: str = Field(description="'merge' when both say the same thing, 'keep' when they differ in any detail")
    text: str | None = Field(None, description="With merge: the single merged wording")


@dataclass
class ShownFact:
    handle: str
    text: str
    when: datetime | None


@dataclass
class ShownObservation:
    handle: str
    text: str
    proof_count: int
    sources: list[str] = field(default_factory=list)  # texts of the facts it rests on, within budget


SYSTEM = """You maintain the consolidated knowledge ("observations") of an AI agent's long-term memory.
You are given NEW FACTS and the EXISTING OBSERVATIONS of one scope that may relate to them. Decide, facet
by facet, what changes:

- update: a new fact confirms, refines or extends an existing observation. Rewrite it in full and cite
  the supporting facts. When a fact contradicts an observation (a change of state or of mind), do NOT
  delete it: update it so it records what changed and when (use the facts' dates), keeping the
  earlier state as history in the wording ("used to prefer React; switched to Vue in March 2024").
- create: a fact is about a facet no observation covers. Create a new observation; never bend an
  unrelated observation to fit it.
- delete: only for an observation that is now redundant; say which one covers it in merged_into. A
  correction is an update too: record the corrected belief and note what was believed before.

Every create and update must cite evidence: the handle of a NEW fact and the exact words of it that
support the observation. Only cite the new facts shown; only update or delete observations shown.
One observation = one belief about one facet. If the new facts add nothing durable, return empty lists.

What to keep:
{rules}
"""


def build_messages(
    facts: list[ShownFact], observations: list[ShownObservation], scope: tuple[str, ...], mission: str | None
) -> list[dict[str, Any]]:
    system = SYSTEM.format(rules=mission.strip() if mission and mission.strip() else DEFAULT_RULES)
    lines = [f"Scope: {', '.join(scope) if scope else '(global, untagged)'}", "", "EXISTING OBSERVATIONS:"]
    if observations:
        for o in observations:
            lines.append(f"{o.handle} (supported by {o.proof_count} facts): {o.text}")
            lines.extend(f"    - source: {text}" for text in o.sources)
    else:
        lines.append("(none yet)")
    lines += ["", "NEW FACTS:"]
    for fact in facts:
        date = fact.when.date().isoformat() if fact.when else "undated"
        lines.append(f"{fact.handle} [{date}]: {fact.text}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


MERGE_SYSTEM = """Two observations from an AI agent's memory are nearly identical in wording. Decide whether
they state the same belief. Answer "merge" only if they say the same thing; answer "keep" if they
differ in any meaningful detail: a number, a date, a negation, a name, a language, a place. With
"merge", write the single merged observation, keeping every detail both contain."""


def merge_messages(first: str, second: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": MERGE_SYSTEM},
        {"role": "user", "content": f"A: {first}\nB: {second}"},
    ]
