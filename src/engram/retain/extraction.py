"""Fact extraction with an LLM: the prompt, the output schema, and the conversion to ExtractedFact.
One call per chunk, temperature 0.1."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from engram.retain.entity_kinds import ENTITY_TYPES, normalise_type
from engram.retain.facts import ExtractedFact
from engram.retain.label_config import LabelGroup
from engram.retain.labels import any_required, build_labels_model, label_entities, prompt_section

if TYPE_CHECKING:
    from engram.llm.base import LLMProvider, TokenUsage

MAX_CAUSES_PER_FACT = 2
ENTITIES_DESCRIPTION = (
    "Named people, organisations, places, products and key concepts, each with its type; "
    "'user' (a person) when about the user"
)


class CausalRelation(BaseModel):
    caused_by: int = Field(description="Index (0-based) of an EARLIER fact in this list that caused this one")


EntityType = Literal[ENTITY_TYPES]  # type: ignore[valid-type]


class EntityMention(BaseModel):
    name: str
    type: str | None = Field(None, description="person, organisation, place, product or concept")


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
    # Accepted as objects or, from models that ignore the schema, as plain names (no kind then).
    entities: list[EntityMention | str] = Field(default_factory=list, description=ENTITIES_DESCRIPTION)
    causal_relations: list[CausalRelation] = Field(default_factory=list)


class StrictEntityMention(BaseModel):
    name: str
    type: EntityType


# What the LLM is asked for: every entity as {name, type}.
_STRICT_ENTITIES = (list[StrictEntityMention], Field(default_factory=list, description=ENTITIES_DESCRIPTION))


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
- entities: the people, organisations, places, products and key concepts in the fact, each as
  {"name", "type"} with type person, organisation, place, product or concept. Use "user" (a person)
  when the fact is about the user.
- causal_relations: when a fact was caused by an EARLIER fact in your list, cite its index (at most 2).
- Skip greetings, filler and anything with no lasting value. Do not invent facts.
"""


def _fact_model(free_form: bool, strict: bool) -> type[BaseModel]:
    """LLMFact as the LLM is asked for it: strict, every entity as {name, type}; in labels-only mode
    without its `entities` field, so the LLM is never asked for free-form entities there, rather than
    asked and filtered."""
    if not free_form:
        kept = {name: (info.annotation, info) for name, info in LLMFact.model_fields.items() if name != "entities"}
        return create_model("LLMFact", **kept)  # type: ignore[call-overload, no-any-return]
    if strict:
        return create_model("LLMFact", __base__=LLMFact, entities=_STRICT_ENTITIES)  # type: ignore[call-overload, no-any-return]
    return LLMFact


def output_model(groups: list[LabelGroup], *, strict: bool = True, free_form: bool = True) -> type[BaseModel]:
    """The schema the LLM must answer with: with label groups, each fact carries a typed `labels`
    (required when a group is, so a strict provider must fill it)."""
    return _cached_output_model(tuple(group.model_dump_json() for group in groups), strict, free_form)


# One class per variant and vocabulary, so the JSON schema cached per class (`schema_of`) is built once.
# A bank's label groups come back from its config on every retain, as new objects: built afresh, each
# extraction call created the pydantic classes twice and their JSON schema once (~3.8 ms of the event
# loop for three small groups, against 0.05 ms without labels). Keyed by the groups' JSON, a changed
# vocabulary is another key. Enough entries for the banks a server retains into at once.
@lru_cache(maxsize=64)
def _cached_output_model(groups_json: tuple[str, ...], strict: bool, free_form: bool) -> type[BaseModel]:
    if not groups_json and free_form and not strict:
        return ExtractionOutput
    groups = [LabelGroup.model_validate_json(text) for text in groups_json]
    return _build_output_model(groups, strict, free_form)


def _build_output_model(groups: list[LabelGroup], strict: bool, free_form: bool) -> type[BaseModel]:
    fact = _fact_model(free_form, strict)
    if groups:
        labels = build_labels_model(groups, strict=strict)
        field = (labels, ...) if strict and any_required(groups) else (labels | None, None)
        fact = create_model("LLMFact", __base__=fact, labels=field)  # type: ignore[call-overload]
    return create_model("ExtractionOutput", facts=(list[fact], ...))  # type: ignore[call-overload]


def _without_entity_rule(prompt: str) -> str:
    """The system prompt minus its "- entities:" rule (the bullet and its continuation lines)."""
    out: list[str] = []
    skipping = False
    for line in prompt.splitlines(keepends=True):
        if line.startswith("- "):
            skipping = line.startswith("- entities:")
        elif not line.startswith("  "):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def build_messages(
    chunk: str,
    *,
    said_at: datetime | None,
    context: str | None,
    mission: str | None,
    custom_instructions: str | None,
    label_groups: list[LabelGroup] | None = None,
    free_form: bool = True,
) -> list[dict[str, Any]]:
    system = SYSTEM_PROMPT if free_form else _without_entity_rule(SYSTEM_PROMPT)
    if label_groups:
        system += "\n" + prompt_section(label_groups, free_form=free_form) + "\n"
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


def _entity_names(entities: list[EntityMention | str]) -> dict[str, str | None]:
    """Distinct names in order, each with its normalised type (None when unknown)."""
    names: dict[str, str | None] = {}
    for entity in entities:
        name, kind = (entity, None) if isinstance(entity, str) else (entity.name, entity.type)
        if name.strip():
            names.setdefault(name.strip(), normalise_type(kind))
    return names


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
        names = _entity_names(getattr(fact, "entities", []))
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
                entities=list(names),
                entity_types={name: kind for name, kind in names.items() if kind},
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
    free_form: bool = True,
    images: list[Any] | None = None,
) -> tuple[list[ExtractedFact], TokenUsage]:
    """free_form False (`entities_allow_free_form: false`): neither the prompt nor the schema asks for
    free-form entities."""
    from engram.llm.structured import generate_structured, schema_of
    from engram.retain.vision import with_images

    messages = build_messages(
        chunk, said_at=said_at, context=context, mission=mission, custom_instructions=custom_instructions,
        label_groups=label_groups, free_form=free_form,
    )
    messages = with_images(messages, images or [])
    groups = label_groups or []
    output, usage = await generate_structured(
        provider, messages, output_model(groups, strict=False, free_form=free_form), temperature=0.1,
        json_schema=schema_of(output_model(groups, strict=True, free_form=free_form)),
    )
    return to_extracted(output.facts, label_groups), usage
