"""Deciding whether a mentioned name is an entity the bank already knows.

score = 0.5 · name similarity (trigram) + 0.3 · co-occurrence overlap + 0.2 · recency; a candidate
matches at 0.6 or more. Co-occurrence overlap compares the mention's neighbours (the other entities
in its fact) with the candidate's known partners, each neighbour weighted 1/√degree so that a hub
like "user", which co-occurs with everything, proves little. Recency falls linearly to 0 over 7 days.
A word-compatibility gate runs first: "Room 101" is never "Room 102", "ORD1234" never "ORD1235", and
"Alice Chen" is never "Alice Wong", while "Alice" may be "Alice Chen".
"""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

NAME_WEIGHT = 0.5
COOCCURRENCE_WEIGHT = 0.3
RECENCY_WEIGHT = 0.2
MATCH_THRESHOLD = 0.6
CANDIDATE_SIMILARITY = 0.3
SAME_BATCH_SIMILARITY = 0.5
RECENCY_DAYS = 7.0

_TOKEN = re.compile(r"\w+")  # any script: "中文 x" and "emoji x" must not look alike
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "the"})


@dataclass
class Candidate:
    """An existing entity that might be the one a mention names."""

    id: uuid.UUID
    name: str
    similarity: float  # trigram similarity of the names, 0..1
    last_seen: datetime
    partners: set[uuid.UUID] = field(default_factory=set)  # entities it has co-occurred with


def name_tokens(name: str) -> list[str]:
    return [t for t in _TOKEN.findall(name.lower()) if t not in _TITLES]


def words_compatible(a: str, b: str) -> bool:
    """May `a` and `b` name the same thing? Words with digits must agree exactly (identifiers such as
    "ORD1234" and "ORD1235", "E10" and "E100" are different things), and one name's words must be
    contained in the other's (a shorter form), unless the names differ only by a small typo."""
    tokens_a, tokens_b = name_tokens(a), name_tokens(b)
    if not tokens_a or not tokens_b:
        return False
    numbers_a = {t for t in tokens_a if _has_digit(t)}
    numbers_b = {t for t in tokens_b if _has_digit(t)}
    if numbers_a != numbers_b:
        return False
    set_a, set_b = set(tokens_a), set(tokens_b)
    if set_a <= set_b or set_b <= set_a:
        return True
    return len(tokens_a) == len(tokens_b) and _close_spelling(" ".join(tokens_a), " ".join(tokens_b))


def _has_digit(token: str) -> bool:
    return any(char.isdigit() for char in token)


def _close_spelling(a: str, b: str) -> bool:
    """At most one edit per 6 characters, for typos such as "Carolin" / "Caroline"."""
    allowed = max(1, min(len(a), len(b)) // 6)
    if abs(len(a) - len(b)) > allowed:
        return False
    # An edit changes at most one character of each side, so the characters the two names do not share
    # bound the distance from below: most pairs (another surname) stop here, before the quadratic part.
    unshared_a, unshared_b = Counter(a) - Counter(b), Counter(b) - Counter(a)
    if max(sum(unshared_a.values()), sum(unshared_b.values())) > allowed:
        return False
    return edit_distance(a, b) <= allowed


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of one character."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def cooccurrence_overlap(
    neighbours: set[uuid.UUID], partners: set[uuid.UUID], degree: dict[uuid.UUID, int]
) -> float:
    """Share of the mention's neighbours (weighted 1/√degree) the candidate has co-occurred with."""
    if not neighbours:
        return 0.0
    weight = {n: 1.0 / math.sqrt(max(degree.get(n, 1), 1)) for n in neighbours}
    total = sum(weight.values())
    shared = sum(w for n, w in weight.items() if n in partners)
    return shared / total if total else 0.0


def recency(last_seen: datetime, now: datetime) -> float:
    days = max(0.0, (now - last_seen).total_seconds() / 86400)
    return max(0.0, 1.0 - days / RECENCY_DAYS)


def score(
    candidate: Candidate, neighbours: set[uuid.UUID], degree: dict[uuid.UUID, int], now: datetime
) -> float:
    return (
        NAME_WEIGHT * candidate.similarity
        + COOCCURRENCE_WEIGHT * cooccurrence_overlap(neighbours, candidate.partners, degree)
        + RECENCY_WEIGHT * recency(candidate.last_seen, now)
    )


def may_match(mention: str, name: str, similarity: float) -> bool:
    """Whether an entity called `name`, `similarity` alike, is scored at all as what `mention` names
    (the other candidates never are, whatever their partners)."""
    return similarity >= CANDIDATE_SIMILARITY and words_compatible(mention, name)


def best_match(
    mention: str,
    candidates: list[Candidate],
    neighbours: set[uuid.UUID],
    degree: dict[uuid.UUID, int],
    now: datetime,
) -> tuple[Candidate, float] | None:
    """The best-scoring compatible candidate at or above the threshold, or None (a new entity)."""
    best: tuple[Candidate, float] | None = None
    for candidate in candidates:
        if not may_match(mention, candidate.name, candidate.similarity):
            continue
        value = score(candidate, neighbours - {candidate.id}, degree, now)
        if value >= MATCH_THRESHOLD and (best is None or value > best[1]):
            best = (candidate, value)
    return best


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's similarity, computed locally for names within one batch (not yet in the database)."""
    grams_a, grams_b = _trigrams(a), _trigrams(b)
    if not grams_a or not grams_b:
        return 0.0
    return len(grams_a & grams_b) / len(grams_a | grams_b)


def _trigrams(text: str) -> set[str]:
    grams: set[str] = set()
    for word in _TOKEN.findall(text.lower()):
        padded = f"  {word} "
        grams.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return grams


def merge_batch_names(names: list[str]) -> dict[str, str]:
    """Within one retain, new names that are trigram-similar (≥ 0.5) and word-compatible are one entity:
    maps each lower-cased name to the canonical spelling, the longest (most specific) form. Each name
    joins the first group whose head it matches.

    Not quadratic: similarity ≥ t needs at least t·|A| shared trigrams, so a name is compared only with
    the heads an index of their trigrams finds sharing that many (a retain can carry thousands of
    names; comparing every pair held the event loop for minutes)."""
    groups: list[list[str]] = []
    head_grams: list[set[str]] = []
    heads_with: dict[str, list[int]] = {}  # trigram -> indexes of the groups whose head has it
    for name in sorted(dict.fromkeys(names), key=len, reverse=True):
        grams = _trigrams(name)
        shared: dict[int, int] = {}
        for gram in grams:
            for index in heads_with.get(gram, ()):
                shared[index] = shared.get(index, 0) + 1
        needed = SAME_BATCH_SIMILARITY * len(grams)
        for index in sorted(i for i, count in shared.items() if count >= needed):
            head = groups[index][0]
            if len(grams & head_grams[index]) / len(grams | head_grams[index]) >= SAME_BATCH_SIMILARITY \
                    and words_compatible(name, head):
                groups[index].append(name)
                break
        else:
            groups.append([name])
            head_grams.append(grams)
            for gram in grams:
                heads_with.setdefault(gram, []).append(len(groups) - 1)
    return {name.lower(): group[0] for group in groups for name in group}
