"""Fact extraction with an LLM: the prompt, the output schema, and the conversion to ExtractedFact.
One call per chunk, temperature 0.1."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from engram.retain.facts import ExtractedFact
from engram.retain.label_config import LabelGroup
from engram.retain.labels import build_labels_model, label_entities, prompt_section

if TYPE_CHECKING:
    from engram.llm.base import LLMProvider, TokenUsage

MAX_CAUSES_PER_FACT = 2


class CausalRelation(BaseModel):
    caused_by: int = Field(description="Index (0-based) of an EARLIER fact in this list that caused this one")


class LLMFact(BaseModel):
    what: str = Field(description="The fact itself, self-contained: name people instead of using pronouns")
    when: str | None = Field(None, description="When it happened, as written or resolved (absolute dates)")
    where: str | None = None
    who: list[str] = Field(default_factory=list, description="People involved")
    why: str | None = Field(None, description="Reason or significance, if stated")
    fact_type: Literal["world", "assistant"] = Field(
        "world", description="'assistant' for what the assistant/agent itself did or said; 'world' otherwise"
    )
    fact_kind: Literal["event", "conversation"] = "conversation"
    occurred_start: str | None = Field(None, description="ISO 8601 start of an event, null otherwise")
    occurred_end: str | None = Field(None, description="ISO 8601 end of an event, null otherwise")
    entities: list[str] = Field(
        default_factory=list,
        description="Named people, organisations, places, products and key concepts; 'user' when about the user",
    )
    causal_relations: list[CausalRelation] = Field(default_factory=list)


class ExtractionOutput(BaseModel):
    facts: list[LLMFact]


SYSTEM_PROMPT = """You extract durable memories from text for an AI agent's long-term memory.
Return every fact worth remembering as a separate, self-contained statement.

Rules:
- One fact per distinct piece of information. Keep names; never write "he", "she" or "they" without the name.
- fact_type: "assistant" for what the assistant/agent did, said or decided; "world" for everything else,
  including facts about the user.
- fact_kind: "event" for something that happened at a time; "conversation" for statements, opinions, plans.
- Resolve relative dates ("yesterday", "last week", "next month") against the date the text was said,
  and give events occurred_start / occurred_end in ISO 8601.
- entities: the people, organisations, places, products and key concepts in the fact. Use "user" when
  the fact is about the user.
- causal_relations: when a fact was caused by an EARLIER fact in your list, cite its index (at most 2).
- Skip greetings, filler and anything with no lasting value. Do not invent facts.
"""


def output_model(groups: list[LabelGroup], *, strict: bool = True) -> type[BaseModel]:
    """The schema the LLM must answer with: with label groups, each fact carries a typed `labels`."""
    if not groups:
        return ExtractionOutput
    labels = build_labels_model(groups, strict=strict)
    fact = create_model("LLMFact", __base__=LLMFact, labels=(labels | None, None))  # type: ignore[call-overload]
    return create_model("ExtractionOutput", facts=(list[fact], ...))  # type: ignore[call-overload]


def build_messages(
    chunk: str,
    *,
    said_at: datetime | None,
    context: str | None,
    mission: str | None,
    custom_instructions: str | None,
    label_groups: list[LabelGroup] | None = None,
) -> list[dict[str, Any]]:
    system = SYSTEM_PROMPT
    if label_groups:
        system += "\n" + prompt_section(label_groups) + "\n"
    if mission:
        system += f"\nFocus of this memory bank: {mission}\n"
    if custom_instructions:
        system += f"\nAdditional instructions:\n{custom_instructions}\n"
    header = [f"Said on: {said_at.isoformat() if said_at else 'unknown date'}"]
    if context:
        header.append(f"Context: {context}")
    user = "\n".join(header) + "\n\nText:\n" + chunk
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _parse_iso(value: str | None) -> datetime | None:
    if not value:
        return None
    from engram.models.dates import parse_timestamp

    return parse_timestamp(value)


def to_extracted(facts: list[LLMFact], groups: list[LabelGroup] | None = None) -> list[ExtractedFact]:
    """Convert the LLM's facts, dropping empty ones, causes that do not point backwards and labels
    outside the vocabulary."""
    out: list[ExtractedFact] = []
    index_map: dict[int, int] = {}
    for original_index, fact in enumerate(facts):
        if not fact.what.strip():
            continue
        parents = [
            index_map[rel.caused_by]
            for rel in fact.causal_relations
            if rel.caused_by in index_map and rel.caused_by < original_index
        ][:MAX_CAUSES_PER_FACT]
        index_map[original_index] = len(out)
        raw_labels = getattr(fact, "labels", None)
        labels, label_tags = label_entities(groups or [], raw_labels.model_dump() if raw_labels else None)
        out.append(
            ExtractedFact(
                what=fact.what,
                fact_type="experience" if fact.fact_type == "assistant" else "world",
                fact_kind=fact.fact_kind,
                when=fact.when,
                where=fact.where,
                who=list(fact.who),
                why=fact.why,
                occurred_start=_parse_iso(fact.occurred_start),
                occurred_end=_parse_iso(fact.occurred_end) or _parse_iso(fact.occurred_start),
                entities=[e for e in dict.fromkeys(e.strip() for e in fact.entities) if e],
                causal_parents=parents,
                labels=labels,
                label_tags=label_tags,
            )
        )
    return out


async def extract_with_llm(
    provider: LLMProvider,
    chunk: str,
    *,
    said_at: datetime | None,
    context: str | None,
    mission: str | None = None,
    custom_instructions: str | None = None,
    label_groups: list[LabelGroup] | None = None,
) -> tuple[list[ExtractedFact], TokenUsage]:
    from engram.llm.structured import generate_structured, schema_of

    messages = build_messages(
        chunk, said_at=said_at, context=context, mission=mission, custom_instructions=custom_instructions,
        label_groups=label_groups,
    )
    groups = label_groups or []
    output, usage = await generate_structured(
        provider, messages, output_model(groups, strict=False), temperature=0.1,
        json_schema=schema_of(output_model(groups, strict=True)),
    )
    return to_extracted(output.facts, label_groups), usage
