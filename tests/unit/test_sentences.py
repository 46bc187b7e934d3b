"""Cutting text into sentences and transcripts into turns, as the no-LLM retain path does."""

from __future__ import annotations

import pytest

from engram.retain.sentences import split_sentences, split_turns

SENTENCES = [
    ("one sentence", "I went to the support group yesterday.", ["I went to the support group yesterday."]),
    (
        "three sentences",
        "I went to the group. It was powerful. Will you come next time?",
        ["I went to the group.", "It was powerful.", "Will you come next time?"],
    ),
    (
        "titles and a.m. stay whole",
        "I met Dr. Smith and Mr. Jones at 9 a.m. today. They were kind.",
        ["I met Dr. Smith and Mr. Jones at 9 a.m. today.", "They were kind."],
    ),
    (
        "e.g. and acronyms stay whole",
        "Fruit, e.g. Apples, is good. We moved to the U.S. in 2019. It was far.",
        ["Fruit, e.g. Apples, is good.", "We moved to the U.S. in 2019.", "It was far."],
    ),
    (
        "decimals stay whole",
        "The score was 3.5 out of 5. Pretty good overall.",
        ["The score was 3.5 out of 5.", "Pretty good overall."],
    ),
    (
        "urls and emails stay whole",
        "See https://example.com/a.b?x=1 for details. Mail jo.doe@mail.com if needed.",
        ["See https://example.com/a.b?x=1 for details.", "Mail jo.doe@mail.com if needed."],
    ),
    (
        "initials",
        "J. K. Rowling wrote the books. I read them all.",
        ["J. K. Rowling wrote the books.", "I read them all."],
    ),
    (
        "ellipses",
        "I waited for hours... Then he finally came. Well... maybe not hours.",
        ["I waited for hours...", "Then he finally came.", "Well... maybe not hours."],
    ),
    (
        "quotes",
        'He said "Stop right there." Then he left the room.',
        ['He said "Stop right there."', "Then he left the room."],
    ),
    (
        "short pieces join the next sentence",
        "Hey Mel! Good to see you! How have you been?",
        ["Hey Mel! Good to see you!", "How have you been?"],
    ),
    ("a short last piece joins the previous one", "That sounds like a plan. Bye!", ["That sounds like a plan. Bye!"]),
    ("a short text stays as it is", "Thanks!", ["Thanks!"]),
    (
        "paragraphs always split",
        "First paragraph here\n\nSecond paragraph here",
        ["First paragraph here", "Second paragraph here"],
    ),
    (
        "a wrapped line is joined, a finished one is not",
        "This line is wrapped\nin the middle.\nThis one stands alone.",
        ["This line is wrapped in the middle.", "This one stands alone."],
    ),
    ("lowercase chat after ! and ?", "wow! that is so cool! did you go?", ["wow! that is so cool!", "did you go?"]),
    (
        "a full stop before lowercase is no boundary",
        "we met at 5 p.m. and left. see you",
        ["we met at 5 p.m. and left. see you"],
    ),
    ("nothing", "  \n\n ", []),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in SENTENCES], ids=[case[0] for case in SENTENCES])
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


TURNS = [
    (
        "a transcript",
        "Caroline: I went to the LGBTQ support group yesterday.\nMelanie: Wow, that's cool!\nCaroline: It was.",
        [
            ("Caroline", "I went to the LGBTQ support group yesterday."),
            ("Melanie", "Wow, that's cool!"),
            ("Caroline", "It was."),
        ],
    ),
    (
        "continuation lines stay in the turn",
        "Melanie: Wow!\nTell me more.\nCaroline: Sure.",
        [("Melanie", "Wow!\nTell me more."), ("Caroline", "Sure.")],
    ),
    (
        "user and assistant",
        "user: my dog is called Max\nassistant: What a nice name!",
        [("user", "my dog is called Max"), ("assistant", "What a nice name!")],
    ),
    (
        "names of up to three words, titles included",
        "Dr. Smith: Hello there.\nJohn Paul Jones: Hi, doc.",
        [("Dr. Smith", "Hello there."), ("John Paul Jones", "Hi, doc.")],
    ),
    ("a single line", "Caroline: just one line", [("Caroline", "just one line")]),
    (
        "text before the first turn",
        "Session of 8 May.\n\nCaroline: Hi!\nMelanie: Hello!",
        [(None, "Session of 8 May."), ("Caroline", "Hi!"), ("Melanie", "Hello!")],
    ),
    (
        "prose is paragraphs",
        "Alice works at Google.\nShe likes it.\n\nBob does not.",
        [(None, "Alice works at Google.\nShe likes it."), (None, "Bob does not.")],
    ),
    (
        "a label is not a speaker",
        "Note: this is prose.\nMore prose here.",
        [(None, "Note: this is prose.\nMore prose here.")],
    ),
    (
        "one label line among prose is not a transcript",
        "Caroline: hi\nand more text",
        [(None, "Caroline: hi\nand more text")],
    ),
    (
        "times are not speakers",
        "We met at 10:30 today.\nIt went well.",
        [(None, "We met at 10:30 today.\nIt went well.")],
    ),
    ("nothing", "", []),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in TURNS], ids=[case[0] for case in TURNS])
def test_split_turns(text: str, expected: list[tuple[str | None, str]]) -> None:
    assert split_turns(text) == expected
