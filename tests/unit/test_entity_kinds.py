"""Entity kinds: the LLM's and callers' types normalised to five, and the offline guesses from cues."""

from __future__ import annotations

import pytest

from engram.retain.entity_kinds import guess_type, normalise_type
from engram.retain.extraction import LLMFact, output_model, to_extracted


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("Person", "person"), ("organization", "organisation"), ("location", "place"), ("object", "product"),
     ("concept", "concept"), ("spaceship", None), (None, None), ("", None)],
)
def test_types_are_normalised_to_the_five_kinds(raw: str | None, kind: str | None) -> None:
    assert normalise_type(raw) == kind


@pytest.mark.parametrize(
    ("name", "text", "speaker", "kind"),
    [
        ("Caroline", "Caroline: I went hiking.", "Caroline", "person"),
        ("Dr. Patel", "I saw Dr. Patel today.", None, "person"),
        ("Melanie", "Melanie said the paint was dry.", None, "person"),
        ("Acme Corp", "Acme Corp shipped it.", None, "organisation"),
        ("Brightwater Labs", "We visited Brightwater Labs.", None, "organisation"),
        ("NASA", "NASA launched a probe.", None, "organisation"),
        ("Lisbon", "She moved to Lisbon last year.", None, "place"),
        ("Mountain View", "Alice works in Mountain View.", None, "place"),
        ("Lake Tahoe", "Lake Tahoe was cold.", None, "place"),
        ("TensorFlow", "Alice specializes in TensorFlow models.", None, "place"),  # a cue can mislead
        ("TensorFlow", "TensorFlow is fast.", None, None),
        ("Miso", "The cat Miso sleeps.", None, None),
    ],
)
def test_offline_guesses_come_from_cues_only(name: str, text: str, speaker: str | None, kind: str | None) -> None:
    assert guess_type(name, text, speaker) == kind


def test_llm_entities_may_be_objects_with_a_type_or_plain_names() -> None:
    fact = LLMFact.model_validate({"what": "Alice works at Google.", "entities": [
        {"name": "Alice", "type": "person"}, {"name": "Google", "type": "organization"}, "Mountain View",
        {"name": "Alice", "type": "place"}, {"name": " ", "type": "person"}]})
    (extracted,) = to_extracted([fact])
    assert extracted.entities == ["Alice", "Google", "Mountain View"]
    assert extracted.entity_types == {"Alice": "person", "Google": "organisation"}


def test_the_schema_asks_for_each_entity_with_one_of_the_five_types() -> None:
    schema = output_model([], strict=True).model_json_schema()
    mention = schema["$defs"]["StrictEntityMention"]
    assert mention["required"] == ["name", "type"]
    assert mention["properties"]["type"]["enum"] == ["person", "organisation", "place", "product", "concept"]
