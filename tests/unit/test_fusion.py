"""Rank fusion: weighted reciprocal ranks, and ties that no arm may break by accident."""

from __future__ import annotations

import uuid

import pytest

from engram.recall.scoring import ARM_WEIGHTS, RRF_K, fuse_rrf

A, B, C = (uuid.uuid4() for _ in range(3))


def test_a_candidate_found_by_two_arms_beats_one_found_by_one() -> None:
    fused = fuse_rrf({"semantic": [(A, 0.9), (B, 0.8)], "temporal": [(B, 0.7)]})
    assert fused[B] > fused[A]
    assert fused[A] == 1 / (RRF_K + 1)


def test_keyword_weighs_more_and_graph_less_than_semantic() -> None:
    assert fuse_rrf({"keyword": [(A, 3.0)]})[A] > fuse_rrf({"semantic": [(A, 0.9)]})[A]
    assert fuse_rrf({"graph": [(A, 0.9)]})[A] < fuse_rrf({"semantic": [(A, 0.9)]})[A]


def test_equal_scores_share_a_rank_so_another_arm_decides() -> None:
    # the keyword arm matched the facts only on a word they all contain: it cannot tell them apart
    fused = fuse_rrf({"keyword": [(A, 0.0), (B, 0.0), (C, 0.0)], "semantic": [(C, 0.5)]})
    assert fused[A] == fused[B] == pytest.approx(ARM_WEIGHTS["keyword"] / (RRF_K + 2))
    assert max(fused, key=fused.__getitem__) == C


def test_a_large_tie_ranks_in_the_middle_of_its_positions() -> None:
    tied = [(uuid.uuid4(), 0.0) for _ in range(1000)]
    fused = fuse_rrf({"semantic": [(A, 2.0), *tied]})
    assert fused[tied[0][0]] == pytest.approx(1 / (RRF_K + 501.5))
