"""The entity resolution scorer on the seed's examples (name 50 %, co-occurrence 30 %, recency 20 %,
match at 0.6)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from engram.retain.entity_scoring import (
    Candidate,
    best_match,
    merge_batch_names,
    score,
    trigram_similarity,
    words_compatible,
)

NOW = datetime(2024, 6, 10, 12, 0, tzinfo=UTC)
GOOGLE, TENSORFLOW, PARIS, USER = (uuid.uuid4() for _ in range(4))
DEGREE = {GOOGLE: 3, TENSORFLOW: 2, PARIS: 4, USER: 400}


def alice_chen(last_seen: datetime, partners: set[uuid.UUID]) -> Candidate:
    return Candidate(uuid.uuid4(), "Alice Chen", trigram_similarity("Alice", "Alice Chen"), last_seen, partners)


def test_alice_with_alice_chens_colleagues_this_week_merges() -> None:
    candidate = alice_chen(NOW - timedelta(days=2), {GOOGLE, TENSORFLOW})
    match = best_match("Alice", [candidate], {GOOGLE, TENSORFLOW}, DEGREE, NOW)
    assert match is not None and match[0] is candidate
    assert match[1] >= 0.6


def test_alice_in_another_context_weeks_later_is_someone_new() -> None:
    candidate = alice_chen(NOW - timedelta(weeks=5), {GOOGLE, TENSORFLOW})
    assert best_match("Alice", [candidate], {PARIS}, DEGREE, NOW) is None


def test_partial_name_without_context_creates_a_new_entity() -> None:
    candidate = alice_chen(NOW - timedelta(hours=1), {GOOGLE})
    assert best_match("Alice", [candidate], set(), DEGREE, NOW) is None


def test_same_name_in_a_different_context_scores_below_the_threshold() -> None:
    # Exact namesakes are candidates like any other (retain/entities.py): the baker is not matched.
    old_namesake = Candidate(uuid.uuid4(), "Jordan", 1.0, NOW - timedelta(days=60), {PARIS})
    assert score(old_namesake, {GOOGLE, TENSORFLOW}, DEGREE, NOW) < 0.6
    recent_colleague = Candidate(uuid.uuid4(), "Jordan", 1.0, NOW - timedelta(days=1), {GOOGLE})
    assert score(recent_colleague, {GOOGLE, TENSORFLOW}, DEGREE, NOW) >= 0.6
    match = best_match("Jordan", [old_namesake, recent_colleague], {GOOGLE, TENSORFLOW}, DEGREE, NOW)
    assert match is not None and match[0] is recent_colleague
    assert best_match("Jordan", [old_namesake], {GOOGLE, TENSORFLOW}, DEGREE, NOW) is None


def test_a_hub_neighbour_does_not_force_a_merge() -> None:
    candidate = alice_chen(NOW - timedelta(days=2), {USER, GOOGLE, TENSORFLOW})
    # "user" co-occurs with everything: sharing only it proves little.
    assert best_match("Alice", [candidate], {USER, PARIS}, DEGREE, NOW) is None
    assert best_match("Alice", [candidate], {USER, GOOGLE, TENSORFLOW}, DEGREE, NOW) is not None


@pytest.mark.parametrize(
    ("a", "b", "compatible"),
    [
        ("Room 101", "Room 102", False),
        ("Room 101", "room 101", True),
        ("Alice", "Alice Chen", True),
        ("Alice Chen", "Alice Wong", False),
        ("Dr. Smith", "Smith", True),
        ("Caroline", "Carolin", True),
        ("Google", "Goodle Maps", False),
        ("ORD1234", "ORD1235", False),  # identifiers: a digit apart is another thing
        ("E10", "E100", False),
        ("ORD1234", "ord1234", True),
        ("Flight BA117", "BA117", True),
    ],
)
def test_word_compatibility_gate(a: str, b: str, compatible: bool) -> None:
    assert words_compatible(a, b) is compatible


def test_similar_new_names_in_one_batch_merge_into_the_longest() -> None:
    merged = merge_batch_names(["Alice", "Alice Chen", "Bob", "Room 101", "Room 102"])
    assert merged["alice"] == "Alice Chen"
    assert merged["bob"] == "Bob"
    assert merged["room 101"] == "Room 101" and merged["room 102"] == "Room 102"


def test_names_in_other_scripts_keep_their_words() -> None:
    assert words_compatible("中文 entity", "emoji entity") is False
    assert words_compatible("Zoë", "zoë") is True


def test_the_spelling_shortcut_never_changes_the_answer() -> None:
    """`_close_spelling` skips the edit-distance table when the unshared characters already exceed the
    allowance: on random near and far pairs it answers exactly what the full table does."""
    import random

    from engram.retain.entity_scoring import _close_spelling
    from engram.retain.entity_scoring import edit_distance as distance

    def edited(text: str, rng: random.Random) -> str:
        chars = list(text)
        for _ in range(rng.randint(0, 4)):  # a few random edits: some pairs stay close, most do not
            at = rng.randrange(len(chars)) if chars else 0
            kind = rng.choice(["insert", "delete", "replace"])
            if kind == "insert" or not chars:
                chars.insert(at, rng.choice("aeiknorst"))
            elif kind == "delete":
                chars.pop(at)
            else:
                chars[at] = rng.choice("xyz")
        return "".join(chars) or "q"

    rng = random.Random(7)
    close = 0
    for _ in range(3000):
        a = "".join(rng.choice("aeiknorst ") for _ in range(rng.randint(3, 16)))
        b = edited(a, rng)
        allowed = max(1, min(len(a), len(b)) // 6)
        want = abs(len(a) - len(b)) <= allowed and distance(a, b) <= allowed
        assert _close_spelling(a, b) == want, (a, b)
        close += want
    assert 200 < close < 2800  # both answers were exercised
