"""Label vocabularies: compiling to a typed model, and keeping only in-vocabulary answers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram.retain.label_config import parse_label_groups
from engram.retain.labels import build_labels_model, label_entities, prompt_section

GROUPS = parse_label_groups([
    {"key": "priority", "type": "value", "tag": True, "values": [{"value": "low"}, {"value": "urgent"}]},
    {"key": "area", "type": "multi-values", "values": [{"value": "api"}, {"value": "billing"}]},
    {"key": "topic", "type": "text"},
    {"key": "customer", "type": "map", "fields": {
        "name": {"type": "text"},
        "plan": {"type": "map", "fields": {"tier": {"type": "value", "values": [{"value": "pro"}]}}}}},
])


def test_strict_model_accepts_only_the_vocabulary() -> None:
    model = build_labels_model(GROUPS)
    model.model_validate({"priority": "urgent", "area": ["api"]})
    with pytest.raises(ValidationError):
        model.model_validate({"priority": "whenever"})
    with pytest.raises(ValidationError):
        model.model_validate({"area": ["api", "payments"]})


def test_lenient_model_parses_what_the_strict_one_refuses() -> None:
    model = build_labels_model(GROUPS, strict=False)
    assert model.model_validate({"priority": "whenever"}).model_dump()["priority"] == "whenever"


def test_off_vocabulary_values_are_dropped_at_every_depth() -> None:
    answer = {
        "priority": "whenever",
        "area": ["api", "payments", "billing"],
        "topic": "  refunds ",
        "customer": [{"name": "Acme", "plan": [{"tier": "pro"}, {"tier": "gold"}]}],
    }
    entities, tags = label_entities(GROUPS, answer)
    assert entities == ["area:api", "area:billing", "topic:refunds", "customer:name:Acme", "customer:plan:tier:pro"]
    assert tags == []


def test_tagged_groups_become_tags() -> None:
    entities, tags = label_entities(GROUPS, {"priority": "urgent"})
    assert entities == tags == ["priority:urgent"]


def test_prompt_lists_each_group_and_value() -> None:
    section = prompt_section(GROUPS)
    assert "- priority (single value or null)" in section
    assert '• "billing"' in section
    assert "tier (value)" in section


def test_a_banks_extraction_classes_are_built_once_for_its_vocabulary() -> None:
    """Each retain parses the bank's groups afresh; the classes (and so the schema cached per class)
    are the same ones for the same vocabulary, and new ones when it changes."""
    from engram.llm.structured import schema_of
    from engram.retain.extraction import output_model

    raw = [{"key": "priority", "type": "value", "values": [{"value": "low"}, {"value": "urgent"}]},
           {"key": "topic", "type": "text"}]
    first = output_model(parse_label_groups(raw), strict=True)
    assert output_model(parse_label_groups(raw), strict=True) is first
    assert output_model(parse_label_groups(raw), strict=False) is not first  # the lenient variant
    assert output_model(parse_label_groups(raw), strict=False, free_form=False) is not output_model(
        parse_label_groups(raw), strict=False)

    raw[0]["values"].append({"value": "blocked"})
    changed = output_model(parse_label_groups(raw), strict=True)
    assert changed is not first
    assert "blocked" in str(schema_of(changed)) and "blocked" not in str(schema_of(first))
