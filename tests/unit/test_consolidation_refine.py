"""The pure parts of consolidation's own decisions: quotes stored as the fact's words, a plain delete
turned into a rewrite by the closest create (or refused), and what the configured strategies become."""

from __future__ import annotations

import uuid
from collections import Counter

import numpy as np
import pytest

from engram.consolidate.plan import Plan, PlannedWrite, exact_quote
from engram.consolidate.refine import refine_instead_of_deleting
from engram.consolidate.strategy_report import read_configured

FACT = "The user built another React dashboard (v2.1) and   enjoyed it."


@pytest.mark.parametrize(
    ("quote", "stored"),
    [
        ("ENJOYED   it", "enjoyed it"),
        ("dashboard (V2.1)", "dashboard (v2.1)"),  # regex characters are literal
        ("and enjoyed", "and   enjoyed"),  # the fact's own spacing
        ("  React  ", "React"),
        ("hated it", FACT),  # not in the fact: the whole fact
        ("", FACT),
        ("enjoy", "enjoy"),  # a substring of a word is still the fact's text
    ],
)
def test_quotes_are_stored_as_the_facts_own_text(quote: str, stored: str) -> None:
    assert exact_quote(quote, FACT) == stored
    assert stored in FACT


def _observation(vector: list[float]) -> dict:
    return {"id": uuid.uuid4(), "embedding": np.array(vector, dtype=np.float32),
            "source_memory_ids": [uuid.uuid4()], "evidence": [{"fact_id": "old", "quote": "old words"}]}


def test_a_plain_delete_becomes_a_rewrite_by_the_closest_create() -> None:
    doomed = _observation([1.0, 0.0])
    far = PlannedWrite("The user has a dog", [uuid.uuid4()], [], vector=np.array([0.0, 1.0]))
    near = PlannedWrite("The user moved to Berlin", [uuid.uuid4()], [{"fact_id": "new", "quote": "Berlin"}],
                        vector=np.array([0.8, 0.6]))
    plan = Plan(writes=[far, near], deletes={doomed["id"]: None})
    stats: Counter[str] = Counter()
    refine_instead_of_deleting(plan, {"O1": doomed}, stats)
    assert plan.deletes == {}
    assert near.observation_id == doomed["id"] and far.observation_id is None
    assert near.sources == [*doomed["source_memory_ids"], *near.sources[1:]]
    assert {e["quote"] for e in near.evidence} == {"old words", "Berlin"}
    assert stats == Counter({"deletes_refined": 1})


def test_a_plain_delete_without_a_create_is_refused_and_a_merge_is_kept() -> None:
    doomed, redundant, keeper = _observation([1.0, 0.0]), _observation([0.0, 1.0]), _observation([0.5, 0.5])
    plan = Plan(deletes={doomed["id"]: None, redundant["id"]: keeper["id"]})
    stats: Counter[str] = Counter()
    refine_instead_of_deleting(plan, {"O1": doomed, "O2": redundant, "O3": keeper}, stats)
    assert plan.deletes == {redundant["id"]: keeper["id"]}, "a delete merged into another observation stands"
    assert stats == Counter({"deletes_refused": 1})


def test_the_configured_strategies_report_what_is_dropped_and_relaxed() -> None:
    report = read_configured([
        {"scopes": [{"tags": ["user:*"]}], "max_observations_per_scope": "3"},
        {"scopes": [{"tags": ["team:*"], "tags_match": "exactly"}], "observations_mission": "Team."},
        "not an object",
        {"scopes": [{"tags": ["user:*"]}]},  # incomplete: kept, claims nothing
    ])
    assert [d["index"] for d in report.dropped] == [0, 2]
    assert report.dropped[0]["problem"].startswith("consolidation_strategies[0].max_observations_per_scope")
    assert report.dropped[1]["problem"].startswith("consolidation_strategies[2]")
    assert [(r["index"], r["problem"].split(":")[0]) for r in report.relaxed] == [
        (1, "consolidation_strategies[1].scopes[0].tags_match")]
    assert [s.rules[0].tags_match for s in report.strategies] == ["all", "all"]
    assert [s.active for s in report.strategies] == [True, False]
    assert read_configured(None).strategies == [] and read_configured({"a": 1}).dropped[0]["index"] is None
