"""Which query words the keyword arm must read the facts of, given every word's document frequency.

BM25 gives a common word a small weight, and a word's contribution to one fact's score is bounded:
the term-frequency factor tf·(k1+1) / (tf + k1·(1 − b + b·length/average)) grows with tf and falls
with the fact's length, so the word's most occurrences in a fact and the shortest fact holding it
bound it. When the list the arm returns (its `limit` best facts) is filled by facts holding a rarer
word, and its last score is above what the common words could add up to, a fact holding only common
words cannot be in it: their facts need not be read. At 100,000 facts "work" is in one in eight,
and reading those was most of the arm's time.

The plan is checked against its result (`is_exact`); when it fails, a second reading takes the facts
holding none of the words read that can still reach the list's last score. A fact holding only some
of the skipped words scores at most their bounds together, so it is read only when it holds all the
words of a combination whose bounds reach that score (`combinations_to_read`): "Who did Leila meet
at the chess tournament?" reads the facts naming Leila, then of the others only those naming both
chess and tournament, not every fact naming one of them. The arm's answer is always exactly BM25
over every fact holding a query word.

Skipping pays only when the skipped words' postings are many against the facts read: otherwise the
arm reads every posting of the query's words in one pass (`reads_every_posting`), exact at once.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

from engram.recall.arms import SCORE_DECIMALS
from engram.store.keyword_frequencies import ScopeWords, WordCount

# Okapi BM25 parameters, and the share of the facts in scope above which a word scores nothing (where
# classic BM25's IDF turns negative): "user" in every fact of a bank says nothing about which one is meant.
BM25_K1 = 1.2
BM25_B = 0.75
UBIQUITOUS_SHARE = 0.5
# Beyond this many skipped words the second reading reads each word that can reach the list alone
# (their combinations would be up to 2^n clauses of one text-search query).
MAX_COMBINED_WORDS = 8
# Scores are rounded to SCORE_DECIMALS decimals: a bound this close to a score may tie it.
SCORE_SLACK = 10.0 ** -SCORE_DECIMALS
# Reading every posting of the weighted words in one pass, merged in fact order, costs about what the
# plan's first reading pays to look up one word of one fact it reads (~1 against ~1.5 µs at 100,000
# facts), and that reading is not always the last. Over 300 fresh questions at 100,000 synthetic
# facts one pass was the quicker unless the postings outnumbered those lookups over three to one (a
# rare name beside a word in a third of the facts): there the plan's skipping pays.
ONE_PASS_MAX_POSTINGS_PER_LOOKUP = 3
# One pass scans each (word, fact type) on its own, and each scan costs ~0.2 ms to plan and start. A
# question of 17 words in three fact types (51 scans) took 15-19 ms that way against the plan's 14-16
# at 5,000 facts, and 85-99 against 214-258 ms at 100,000; past this many scans the plan reads.
ONE_PASS_MAX_SCANS = 64


def idf(facts_with_word: int, facts: int) -> float:
    """BM25's inverse document frequency; 0 for a word in over UBIQUITOUS_SHARE of the facts."""
    if facts_with_word > 1 and facts_with_word > facts * UBIQUITOUS_SHARE:
        return 0.0
    return math.log(1 + (facts - facts_with_word + 0.5) / (facts_with_word + 0.5))


def tf_factor(tf: float, length: float, average_length: float) -> float:
    return tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average_length))


@dataclass(frozen=True)
class KeywordPlan:
    """`weights`: the IDF of every query word with a non-zero one; `commonest_first`: those words by
    weight; `bounds[k]`: the most the k commonest can add to a fact's score together; the first
    `skipped` words go unread (the facts holding one of the others are scored, with all their words)."""

    weights: dict[str, float]
    commonest_first: list[str]
    bounds: list[float]
    skipped: int
    average_length: float
    postings: dict[str, int] = field(default_factory=dict)  # the facts holding each weighted word

    def reads_every_posting(self, fact_types: int) -> bool:
        """Whether one pass over every posting of the weighted words (in `fact_types` fact types) is the
        cheaper reading: exact at once, and no dearer than ONE_PASS_MAX_POSTINGS_PER_LOOKUP times the
        lookups of the words of each fact the first reading takes."""
        if not self.weights or len(self.weights) * fact_types > ONE_PASS_MAX_SCANS:
            return False
        lookups = len(self.weights) * sum(self.postings[word] for word in self.read)
        return sum(self.postings.values()) <= ONE_PASS_MAX_POSTINGS_PER_LOOKUP * lookups

    @property
    def read(self) -> list[str]:
        return sorted(self.commonest_first[self.skipped:])

    @property
    def skips(self) -> bool:
        return self.skipped > 0

    def is_exact(self, scores: list[float], limit: int) -> bool:
        """Whether the best `limit` scores of the facts read are the best of all facts: nothing was
        skipped, or the list is full and its last score beats every fact holding only skipped words."""
        return not self.skips or (
            len(scores) >= limit and scores[limit - 1] > self.bounds[self.skipped] + SCORE_SLACK)

    def combinations_to_read(self, scores: list[float], limit: int) -> list[tuple[str, ...]]:
        """After a reading that was not exact with these scores: the smallest sets of skipped words whose
        bounds together reach the list's last score. A fact holding none of the words read can enter
        the list only if it holds every word of one of them (a superset's facts hold a smaller set's
        words). A list not full, or too many skipped words, reads words one by one."""
        skipped = self.commonest_first[: self.skipped]
        if len(scores) < limit:
            return [(word,) for word in sorted(skipped)]
        last = scores[limit - 1] - SCORE_SLACK
        if len(skipped) > MAX_COMBINED_WORDS:
            return [(word,) for word in self.skipping_below(scores, limit).read if word not in self.read]
        bound = {word: self.bounds[i + 1] - self.bounds[i] for i, word in enumerate(skipped)}
        found: list[tuple[str, ...]] = []
        for size in range(1, len(skipped) + 1):
            for combination in itertools.combinations(sorted(skipped), size):
                if any(set(smaller) <= set(combination) for smaller in found):
                    continue
                if sum(bound[word] for word in combination) >= last:
                    found.append(combination)
        return found

    def skipping_below(self, scores: list[float], limit: int) -> KeywordPlan:
        """The plan to run after this one was not exact with these scores: it skips the most common
        words that cannot reach the list's last score (none if the list was not full). Its list is
        exact: it reads a superset of the facts, so its last score is at least as high."""
        skipped = 0
        if len(scores) >= limit:
            while skipped < self.skipped and self.bounds[skipped + 1] < scores[limit - 1] - SCORE_SLACK:
                skipped += 1
        return replace(self, skipped=skipped)


def word_bound(weight: float, count: WordCount, average_length: float) -> float:
    """The most one word adds to a fact's score (a weighted tf never exceeds its occurrences)."""
    if count.max_occurrences is None or count.min_length is None:
        return weight * (BM25_K1 + 1)  # the factor's supremum
    return weight * tf_factor(count.max_occurrences, count.min_length, average_length)


def plan(scope: ScopeWords, limit: int) -> KeywordPlan:
    """Skip as many of the commonest words as leave words holding at least `limit` facts: reading the
    rarest words' facts is cheap, and when it does not settle the list its last score says which words
    the second reading can still skip (`skipping_below`)."""
    facts = max(scope.facts, max((c.facts for c in scope.words.values()), default=0), 1)
    average_length = max(scope.total_length / facts, 1.0) if scope.facts else 1.0
    weights = {word: w for word, count in scope.words.items() if (w := idf(count.facts, facts)) > 0}
    commonest_first = sorted(weights, key=lambda word: (weights[word], word))
    bounds = [0.0]
    for word in commonest_first:
        bounds.append(bounds[-1] + word_bound(weights[word], scope.words[word], average_length))
    skipped = 0
    while (skipped + 1 < len(commonest_first)
           and sum(scope.words[w].facts for w in commonest_first[skipped + 1:]) >= limit):
        skipped += 1
    postings = {word: scope.words[word].facts for word in weights}
    return KeywordPlan(weights, commonest_first, bounds, skipped, average_length, postings)
