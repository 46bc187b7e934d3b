"""The indexed batch merge of new entity names gives exactly what comparing every pair gives."""

from __future__ import annotations

import random

from engram.retain.entity_scoring import SAME_BATCH_SIMILARITY, merge_batch_names, trigram_similarity, words_compatible

WORDS = ["Alice", "Alicia", "Bob", "Bobby", "Room 101", "Room 102", "Chen", "Alice Chen", "Port Alba",
         "Port Albany", "Harbour", "Harbor", "Zoë", "Zoe", "中文", "emoji", "x"]


def every_pair(names: list[str]) -> dict[str, str]:
    groups: list[list[str]] = []
    for name in sorted(dict.fromkeys(names), key=len, reverse=True):
        for group in groups:
            if trigram_similarity(name, group[0]) >= SAME_BATCH_SIMILARITY and words_compatible(name, group[0]):
                group.append(name)
                break
        else:
            groups.append([name])
    return {name.lower(): group[0] for group in groups for name in group}


def test_the_index_finds_the_same_groups_as_every_pair() -> None:
    rng = random.Random(7)
    for _ in range(300):
        names = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(rng.randint(1, 30))]
        assert merge_batch_names(names) == every_pair(names), names


def test_names_without_trigrams_stay_apart() -> None:
    assert merge_batch_names(["!!", "??"]) == {"!!": "!!", "??": "??"}
