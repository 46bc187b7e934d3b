"""The unit retain produces: one extracted fact, before it is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class ExtractedFact:
    """A fact from one chunk. `causal_parents` index earlier facts of the same chunk."""

    what: str
    fact_type: str = "world"  # world | experience
    fact_kind: str = "conversation"  # event | conversation
    when: str | None = None
    where: str | None = None
    who: list[str] = field(default_factory=list)
    why: str | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    entities: list[str] = field(default_factory=list)
    entity_types: dict[str, str] = field(default_factory=dict)  # name → person, place … (entity_kinds)
    causal_parents: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # `key:value` entities of the bank's vocabulary
    label_tags: list[str] = field(default_factory=list)  # the labels whose group has `tag: true`
    # Offline facts only: what was said just before (the previous turn or sentence), and the fact's
    # sentences when it has several, each as it should be embedded ("Speaker: sentence").
    lead_in: str | None = None
    sentences: list[str] = field(default_factory=list)

    def stored_text(self) -> str:
        """`what | When: … | Involving: … | why`: one line that reads well to an LLM and a person."""
        parts = [self.what.strip()]
        if self.when:
            parts.append(f"When: {self.when.strip()}")
        if self.where and self.where.strip().lower() not in self.what.lower():
            parts.append(f"Where: {self.where.strip()}")
        if self.who:
            parts.append("Involving: " + ", ".join(name.strip() for name in self.who if name.strip()))
        if self.why:
            parts.append(self.why.strip())
        return " | ".join(p for p in parts if p)


def embedding_text(text: str, when: datetime | None, entities: list[str]) -> str:
    """What is embedded for a fact: its text plus its date and entity names, so that a query naming a
    person or a month lands near the facts about them even when the wording differs."""
    extra = []
    if when is not None:
        extra.append(when.strftime("%B %Y"))
    names = [name for name in entities if name.lower() not in text.lower()]
    if names:
        extra.append(", ".join(names))
    return text if not extra else f"{text} ({'; '.join(extra)})"
