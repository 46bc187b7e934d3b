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


def test_score_fusion_weighs_how_far_apart_scores_are_not_only_their_order() -> None:
    """A and B nearly tie in the keyword arm (9.99 and 10) and in the semantic arm A is ahead: score
    fusion ranks A first. RRF saw only the ranks, and the keyword arm's heavier rank 1 put B first."""
    from engram.recall.scoring import fuse_scores

    ranked = {"keyword": [(B, 10.0), (A, 9.99), (C, 1.0)], "semantic": [(A, 0.9), (B, 0.88), (C, 0.3)]}
    fused = fuse_scores(ranked)
    assert fused[A] > fused[B] > fused[C]
    assert fused[C] == 0.0  # the last of every arm it is in
    rrf = fuse_rrf(ranked)
    assert rrf[B] > rrf[A]


def test_the_keyword_weight_follows_how_rare_the_matched_words_are() -> None:
    from engram.recall.scoring import KEYWORD_REFERENCE_SCORE, SCORE_WEIGHTS, arm_weights

    rare = arm_weights({"keyword": [(A, KEYWORD_REFERENCE_SCORE * 4)], "semantic": [(A, 0.5)]})
    common = arm_weights({"keyword": [(A, KEYWORD_REFERENCE_SCORE / 4)], "semantic": [(A, 0.5)]})
    assert rare["keyword"] == pytest.approx(SCORE_WEIGHTS["keyword"] * 2)
    assert common["keyword"] == pytest.approx(SCORE_WEIGHTS["keyword"] / 2)
    assert rare["semantic"] == common["semantic"] == SCORE_WEIGHTS["semantic"]


def test_a_cut_keeps_every_candidate_tied_with_its_last() -> None:
    from engram.recall.scoring import best_first, leading

    scores = {A: 0.9, B: 0.5, C: 0.5, uuid.uuid4(): 0.1}
    ranked = best_first(scores)
    assert set(leading(ranked, scores, 2)) == {A, B, C}  # B and C tie: which one came second was their ids
    assert leading(ranked, scores, 1) == [A]
    assert leading(ranked, scores, 10) == ranked
    assert leading(ranked, scores, 0) == []


def test_a_neighbours_shares_sum_alike_whatever_order_the_sources_come_in() -> None:
    from engram.recall.neighbours import share_with_neighbours

    # shares that, added one by one in different orders, give sums apart in their last bit
    fused = {A: 0.26, B: 0.23, C: 1.0, (D := uuid.uuid4()): 0.47}
    neighbours = {B: [(A, False)], C: [(A, True)], D: [(A, False)]}
    sums = {share_with_neighbours(fused, order, neighbours)[A] for order in ([B, C, D], [D, C, B], [C, B, D])}
    assert len(sums) == 1
