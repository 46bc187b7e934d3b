"""Fusing the arms and scoring the candidates: reciprocal rank fusion (k = 60), then small
multiplicative boosts for recency (±10 % over a year), temporal proximity to the query's window
(±10 %) and, for observations, the number of supporting facts (±5 %)."""

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


def best_first(fused: dict[uuid.UUID, float]) -> list[uuid.UUID]:
    """The fused candidates best first; equal scores by id, so the cut at the candidate limit is stable."""
    return sorted(fused, key=lambda unit_id: (-fused[unit_id], unit_id))


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
