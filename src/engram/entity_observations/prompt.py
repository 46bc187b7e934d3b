"""The entity-summary LLM task: an entity's most recent facts in, one objective summary out. The
bank's disposition plays no part: observations state what the facts say, opinions are reflect's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SYSTEM = """You write the observation a long-term memory keeps about one entity (a person, organisation,
place, product or concept): a condensed, objective summary of what the given facts say about it.

Rules:
- Use only the facts given. Do not guess, judge or add opinions.
- Prefer durable knowledge (roles, relationships, preferences, skills, long-lived states) over one-off events.
- Where facts disagree, the later one is the current state; say what changed and when.
- Write one to four sentences of plain prose that name the entity.
"""


class EntitySummary(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)  # blank is no summary: invalid

    text: str = Field(min_length=1, description="The observation: one to four sentences about the entity")


def build_messages(name: str, facts: list[tuple[str, datetime | None]]) -> list[dict[str, Any]]:
    """`facts` newest first, each (text, when said); shown oldest first so changes read in order."""
    lines = [f"- [{when.date().isoformat() if when else 'undated'}] {text}" for text, when in reversed(facts)]
    user = f"Entity: {name}\n\nFacts ({len(facts)}, oldest first):\n" + "\n".join(lines)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
