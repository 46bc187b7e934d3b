"""Entity labels in extraction: the label groups compile into a pydantic model attached to each
extracted fact (enums become Literal types, so a schema-enforcing provider cannot answer outside the
vocabulary), a prompt section describes them, and the answer is checked against the vocabulary again
before it becomes `key:value` entities and tags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from engram.retain.label_config import LabelField, LabelGroup, LabelValue

RULE = "═" * 74


def _python_name(key: str) -> str:
    """A valid field name for a label key ("product-area" → "product_area")."""
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in key)
    return name if name and not name[0].isdigit() else f"k_{name}"


def _field_type(
    kind: str, values: list[LabelValue], fields: dict[str, LabelField] | None, name: str, strict: bool,
    required: bool = False,
) -> Any:
    """`required` (a group with `optional: false`) applies to the schema the provider enforces: no null,
    no empty list. What is parsed stays lenient, so a model that skips one still yields its facts."""
    must = required and strict
    if kind in ("value", "multi-values"):
        # Strict (the schema the provider enforces): Literal enums. Lenient (what is parsed): plain
        # strings, so one off-vocabulary value is dropped afterwards instead of failing the whole answer.
        choice: Any = Literal[tuple(v.value for v in values)] if strict else str  # type: ignore[misc]
        if kind == "multi-values":
            return (list[choice], Field(..., min_length=1) if must else Field(default_factory=list))
        return (choice, ...) if must else (choice | None, None)
    if kind == "text":
        return (str, Field(..., min_length=1)) if must else (str | None, None)
    nested = create_model(  # type: ignore[call-overload]
        f"{name}_entry",
        **{_python_name(f): _field_type(spec.type, spec.values, spec.fields, f"{name}_{f}", strict)
           for f, spec in (fields or {}).items()},
    )
    return (list[nested], Field(..., min_length=1) if must else Field(default_factory=list))


def build_labels_model(groups: list[LabelGroup], *, strict: bool = True) -> type[BaseModel]:
    """One typed field per label group: value → Literal | None, multi-values → list[Literal],
    text → str | None, map → list of a nested model; a required group (`optional: false`) allows no
    null and no empty list in the strict schema."""
    definitions = {
        _python_name(g.key): _field_type(g.type, g.values, g.fields, _python_name(g.key), strict, not g.optional)
        for g in groups
    }
    return create_model("Labels", **definitions)  # type: ignore[call-overload]


def any_required(groups: list[LabelGroup]) -> bool:
    return any(not g.optional for g in groups)


OPTIONAL_SHAPES = {"value": "single value or null", "multi-values": "multi-value (list)",
                   "text": "free text or null", "map": "list of objects with the fields below"}
REQUIRED_SHAPES = {"value": "single value, REQUIRED", "multi-values": "multi-value (list), REQUIRED: at least one",
                   "text": "free text, REQUIRED",
                   "map": "list of objects with the fields below, REQUIRED: at least one"}


def prompt_section(groups: list[LabelGroup], *, free_form: bool = True) -> str:
    """The labels part of the extraction prompt. Without free-form entities (labels-only mode) the LLM
    is told to extract none, since the schema no longer has an 'entities' field."""
    entities = (
        ["Classify each fact using the structured 'labels' field. Continue extracting regular named",
         "entities in the 'entities' field."]
        if free_form else
        ["Classify each fact using the structured 'labels' field. These labels are the only entities",
         "this memory bank keeps: do not extract any other entities."]
    )
    lines = [RULE, "ENTITY LABELS - CLASSIFICATION ATTRIBUTES", RULE, "", *entities, "",
             "For each fact, fill the 'labels' object. Each field is a label group:", ""]
    for group in groups:
        shape = (OPTIONAL_SHAPES if group.optional else REQUIRED_SHAPES)[group.type]
        lines.append(f"- {_python_name(group.key)} ({shape}): {group.description or group.key}")
        lines.extend(_describe(group.type, group.values, group.fields, indent="    "))
        lines.append("")
    lines.append("Only assign labels when clearly applicable. Leave null/empty if the fact does not match.")
    if any_required(groups):
        lines.append("A group marked REQUIRED must always be filled: pick the closest allowed value.")
    return "\n".join(lines)


def _describe(kind: str, values: list[LabelValue], fields: dict[str, LabelField] | None, indent: str) -> list[str]:
    if kind in ("value", "multi-values"):
        return [f'{indent}• "{v.value}"' + (f" — {v.description}" if v.description else "") for v in values]
    lines = []
    for name, spec in (fields or {}).items():
        lines.append(f"{indent}{name} ({spec.type}): {spec.description or name}")
        lines.extend(_describe(spec.type, spec.values, spec.fields, indent + "    "))
    return lines


def label_entities(groups: list[LabelGroup], labels: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The `key:value` entities an answer's labels stand for, and the ones to write as tags. Values
    outside the vocabulary are dropped, at every depth of a map."""
    if not labels:
        return [], []
    entities: list[str] = []
    tags: list[str] = []
    for group in groups:
        found = _values(group.type, group.values, group.fields, labels.get(_python_name(group.key)), group.key)
        entities.extend(found)
        if group.tag:
            tags.extend(found)
    return list(dict.fromkeys(entities)), list(dict.fromkeys(tags))


def _values(kind: str, allowed: list[LabelValue], fields: dict[str, LabelField] | None, raw: Any,
            prefix: str) -> list[str]:
    if raw is None:
        return []
    if kind in ("value", "multi-values"):
        vocabulary = {v.value for v in allowed}
        answers = raw if isinstance(raw, list) else [raw]
        if kind == "value":
            answers = answers[:1]
        return [f"{prefix}:{a}" for a in answers if isinstance(a, str) and a in vocabulary]
    if kind == "text":
        return [f"{prefix}:{raw.strip()}"] if isinstance(raw, str) and raw.strip() else []
    out: list[str] = []
    for entry in raw if isinstance(raw, list) else [raw]:
        if not isinstance(entry, dict):
            continue
        for name, spec in (fields or {}).items():
            out.extend(_values(spec.type, spec.values, spec.fields, entry.get(_python_name(name)), f"{prefix}:{name}"))
    return out
