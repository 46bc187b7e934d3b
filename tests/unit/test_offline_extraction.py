"""The offline extractor's facts carry what recall needs beyond their text: the turn said before them
(lead-in) and, for a turn of several sentences, those sentences with the speaker's name."""

from __future__ import annotations

from datetime import UTC, datetime

from engram.retain.offline import extract_offline

SAID_AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_each_turn_carries_the_turn_before_it_as_lead_in() -> None:
    facts = extract_offline(
        "Caroline: Have you ever been to the Grand Canyon?\nMelanie: Yes, twice! We hiked to the river.",
        said_at=SAID_AT,
    )
    assert [f.what for f in facts] == [
        "Caroline: Have you ever been to the Grand Canyon?",
        "Melanie: Yes, twice! We hiked to the river.",
    ]
    assert facts[0].lead_in is None
    assert facts[1].lead_in == "Caroline: Have you ever been to the Grand Canyon?"


def test_a_turn_of_several_sentences_lists_them_with_the_speaker() -> None:
    [fact] = extract_offline(
        "Melanie: Work has been crazy this month. I finally adopted a puppy from the shelter!", said_at=SAID_AT
    )
    assert fact.sentences == ["Melanie: Work has been crazy this month.",
                              "Melanie: I finally adopted a puppy from the shelter!"]


def test_a_one_sentence_turn_needs_no_sentence_vectors() -> None:
    [fact] = extract_offline("Melanie: I painted a sunrise over the lake last weekend.", said_at=SAID_AT)
    assert fact.sentences == []


def test_prose_sentences_lead_into_each_other() -> None:
    facts = extract_offline("The office moved to Berlin in March. It has a roof garden.", said_at=None)
    assert [f.what for f in facts] == ["The office moved to Berlin in March.", "It has a roof garden."]
    assert facts[1].lead_in == "The office moved to Berlin in March."
    assert all(f.sentences == [] for f in facts)
