"""What an exclusion question's keyword search leaves out."""

from __future__ import annotations

import pytest

from engram.recall.exclusion import keyword_text


@pytest.mark.parametrize(("question", "excluded"), [
    ("What sports does John like besides basketball?", "basketball"),
    ("What outdoor activities has Andrew done other than hiking in nature?", "hiking"),
    ("Which activity has John done apart from yoga at the studio?", "yoga"),
    ("What did Tim start learning in addition to German, this year?", "German"),
])
def test_the_excluded_thing_is_not_searched(question: str, excluded: str) -> None:
    words = keyword_text(question)
    assert excluded not in words
    assert words.split()[:2] == question.split()[:2]


def test_the_rest_of_a_question_after_the_exclusion_is_kept() -> None:
    assert "this year" in keyword_text("What did Tim start learning in addition to German, this year?")


def test_a_question_that_is_only_an_exclusion_is_searched_whole() -> None:
    assert keyword_text("besides basketball") == "besides basketball"
    assert keyword_text("What else?") == "What else?"
