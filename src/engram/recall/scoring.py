"""Fusing the arms and scoring the candidates: a weighted sum of each arm's scores, scaled to its own
list (reciprocal rank fusion, k = 60, is kept for comparison), then small multiplicative boosts for
recency (±10 % over a year), temporal proximity to the query's window (±10 %) and, for observations,
the number of supporting facts (±5 %)."""

from __future__ import annotations

import uuid
from datetime import datetime

from engram.store.instants import aware

RRF_K = 60
RECENCY_SPAN_DAYS = 365.0
PROOF_SATURATION = 10


# Arm weights in the fusion, tuned on LoCoMo (bench/locomo_recall.py): the graph arm finds what the
# query does not say and would drown exact matches at full weight; exact words are strong evidence.
ARM_WEIGHTS = {"graph": 0.3, "keyword": 1.3}


def fuse_rrf(ranked_lists: dict[str, list[tuple[uuid.UUID, float]]], k: int = RRF_K) -> dict[uuid.UUID, float]:
    """Weighted reciprocal rank fusion of lists sorted best first. Equal scores share the mean of their
    positions, so an arm that cannot tell candidates apart neither picks one of two nor lifts a
    thousand (a word every fact contains) to the rank of the first. Arms are summed in name order, so
    a fact's score is the same float whatever order the arms finished in."""
    fused: dict[uuid.UUID, float] = {}
    for arm in sorted(ranked_lists):
        ranked = ranked_lists[arm]
        weight = ARM_WEIGHTS.get(arm, 1.0)
        start = 0
        while start < len(ranked):
            end = start
            while end + 1 < len(ranked) and ranked[end + 1][1] == ranked[start][1]:
                end += 1
            rank = (start + end) / 2 + 1  # positions start..end, counted from 1
            for unit_id, _ in ranked[start : end + 1]:
                fused[unit_id] = fused.get(unit_id, 0.0) + weight / (k + rank)
            start = end + 1
    return fused


# Score fusion, tuned on LoCoMo's dev split (bench/locomo_ablation.py). Each arm's scores are scaled to
# its own list (best 1, last 0), so a clear winner of an arm stays ahead where RRF gave rank 1 and
# rank 2 nearly the same share; the graph arm only breaks near-ties (offline, its entities are mostly
# the speakers); the keyword arm's weight follows the query: KEYWORD_WEIGHT × √(best BM25 score /
# KEYWORD_REFERENCE_SCORE), within ×0.5 and ×2. A query whose rare words match (a name, "Zion")
# trusts keywords more; one matching only common words ("hobbies", "likes") trusts meaning more.
SCORE_WEIGHTS = {"semantic": 1.0, "keyword": 1.3, "graph": 0.15, "temporal": 0.5}
KEYWORD_REFERENCE_SCORE = 9.8  # the median best BM25 score of the dev split's questions
KEYWORD_WEIGHT_RANGE = (0.5, 2.0)


def arm_weights(ranked_lists: dict[str, list[tuple[uuid.UUID, float]]]) -> dict[str, float]:
    """This query's weight of each arm (see SCORE_WEIGHTS)."""
    weights = {arm: SCORE_WEIGHTS.get(arm, 1.0) for arm in ranked_lists}
    keyword = ranked_lists.get("keyword")
    if keyword:
        low, high = KEYWORD_WEIGHT_RANGE
        share = max(keyword[0][1], 0.0) / KEYWORD_REFERENCE_SCORE
        weights["keyword"] *= min(max(share**0.5, low), high)
    return weights


def fuse_scores(ranked_lists: dict[str, list[tuple[uuid.UUID, float]]]) -> dict[uuid.UUID, float]:
    """The weighted sum of each arm's scores, each scaled over its own list: the arm's best 1, its last
    0 (a list of one, or of equal scores, counts 1). Arms are summed in name order."""
    weights = arm_weights(ranked_lists)
    fused: dict[uuid.UUID, float] = {}
    for arm in sorted(ranked_lists):
        ranked = ranked_lists[arm]
        if not ranked:
            continue
        high, low = ranked[0][1], ranked[-1][1]
        span = high - low
        for unit_id, score in ranked:
            scaled = (score - low) / span if span > 0 else 1.0
            fused[unit_id] = fused.get(unit_id, 0.0) + weights[arm] * scaled
    return fused


def best_first(fused: dict[uuid.UUID, float]) -> list[uuid.UUID]:
    """The fused candidates best first; equal scores by id (cut them with `leading`)."""
    return sorted(fused, key=lambda unit_id: (-fused[unit_id], unit_id))


def leading(ranked: list[uuid.UUID], scores: dict[uuid.UUID, float], n: int) -> list[uuid.UUID]:
    """The first `n` of `ranked` (best first by `scores`) and every further one tied with the n-th. A
    cut inside a run of equal scores would keep those whose ids sort first, and ids differ between two
    ingests of the same data: which facts pass a share to their neighbours or speak for their document
    must not depend on them."""
    if n <= 0:
        return []
    if len(ranked) <= n:
        return list(ranked)
    end, last = n, scores[ranked[n - 1]]
    while end < len(ranked) and scores[ranked[end]] == last:
        end += 1
    return ranked[:end]


def recency_factor(when: datetime | None, now: datetime) -> float:
    """1.1 for a fact from now, falling linearly to 0.9 for one a year old or older."""
    if when is None:
        return 1.0
    when, now = aware(when), aware(now)  # a stored ±infinity (older versions) reads back naive
    age_days = max(0.0, (now - when).total_seconds() / 86400)
    return 1.1 - 0.2 * min(age_days / RECENCY_SPAN_DAYS, 1.0)


def temporal_factor(start: datetime | None, end: datetime | None, window: tuple[datetime, datetime] | None) -> float:
    """1.1 inside the query's time window, down to 0.9 at a window's length away or more."""
    if window is None or start is None:
        return 1.0
    lo, hi = aware(window[0]), aware(window[1])
    start, end = aware(start), aware(end or start)
    if start < hi and end >= lo:
        return 1.1
    span = max((hi - lo).total_seconds(), 86400.0)
    gap = (lo - end).total_seconds() if end < lo else (start - hi).total_seconds()
    return 1.1 - 0.2 * min(gap / span, 1.0)


def proof_factor(fact_type: str, proof_count: int) -> float:
    """Observations backed by more facts rank slightly higher: 0.95 with one source, 1.05 at ten."""
    if fact_type != "observation":
        return 1.0
    share = (min(max(proof_count, 1), PROOF_SATURATION) - 1) / (PROOF_SATURATION - 1)
    return 0.95 + 0.1 * share
