"""The rule-based entity extractor used when no LLM is configured: names, places, products and
titles from chat lines, with precision over recall."""

from __future__ import annotations

import pytest

from engram.retain.offline_entities import extract_entities

CHAT_LINES = [
    (
        "the speaker counts when speaking in the first person",
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "Caroline",
        ["Caroline", "LGBTQ"],
    ),
    (
        "a speaker label alone is not an entity",
        "Melanie: Wow, that's great! Did you and Mel go to Paris with Dr. Smith?",
        None,
        ["Mel", "Paris", "Dr. Smith"],
    ),
    (
        "names, places, companies, inner capitals",
        "Alice works at Google in Mountain View. She specializes in TensorFlow.",
        None,
        ["Alice", "Google", "Mountain View", "TensorFlow"],
    ),
    (
        "the speaker sits where the first person first appears",
        "Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
        "Melanie",
        ["Caroline", "Melanie"],
    ),
    ("user is a speaker like any other", "my dog Max loves the park", "user", ["user", "Max"]),
    ("no first person, no speaker", "That sounds amazing, congrats on the new job!", "Melanie", []),
    (
        "connectors, titles and initials inside names",
        "Stephen King and J. K. Rowling met at the Bank of America in the U.S. last year.",
        None,
        ["Stephen King", "J. K. Rowling", "Bank of America", "U.S."],
    ),
    (
        "possessives are stripped, quoted titles kept whole",
        'I just read "Nothing is Impossible" and loved Caroline\'s review of it.',
        None,
        ["Nothing is Impossible", "Caroline"],
    ),
    (
        "adjectives that open a place name",
        "New York is great. I bought it at Best Buy in the US.",
        None,
        ["New York", "Best Buy", "US"],
    ),
    ("&' joins an acronym, not two people", "I got an iPhone from AT&T with Mel & Caroline.", None,
     ["iPhone", "AT&T", "Mel", "Caroline"]),
    (
        "a greeting before a name",
        "Woah Joanna, that's a huge achievement! Yo Tim, congrats!",
        None,
        ["Joanna", "Tim"],
    ),
    ("names are distinct, first spelling kept", "Max ran off. We found Max near MAX's bowl.", None, ["Max"]),
]


@pytest.mark.parametrize(
    ("text", "speaker", "expected"), [case[1:] for case in CHAT_LINES], ids=[case[0] for case in CHAT_LINES]
)
def test_extract_entities(text: str, speaker: str | None, expected: list[str]) -> None:
    assert extract_entities(text, speaker=speaker) == expected


NOT_ENTITIES = [
    ("sentence-initial common words", "The transgender stories were so inspiring! Thanks for the support."),
    ("pronouns and interjections", "Wow, I love it! Yeah, we should go. Haha OK."),
    ("weekdays, months and seasons", "On Friday in May we'll go camping, and again in Summer."),
    ("verbs, plurals and adverbs at the start", "Painting helps. Visited the lake. Animals are great. Honestly, no."),
    ("family roles", "Mom and Dad said hi to Grandma."),
    ("a modal May", "May I ask how it went?"),
    ("shouted words", "That was SO cool, LOL."),
    ("single letters", "I got an A on the test."),
    ("a lone title", "The doctor, Dr., was late."),
    ("lowercase text", "i went to the park with my dog"),
]


@pytest.mark.parametrize("text", [case[1] for case in NOT_ENTITIES], ids=[case[0] for case in NOT_ENTITIES])
def test_common_words_are_not_entities(text: str) -> None:
    assert extract_entities(text) == []


def test_a_transcript_gives_each_line_its_own_speaker() -> None:
    transcript = "Caroline: I met Mel at the Pride parade.\nMelanie: Did you see Oscar there?\nCaroline: We did!"
    assert extract_entities(transcript) == ["Caroline", "Mel", "Pride", "Oscar"]
