"""Consolidation strategies, as the seed describes them: how a rule matches a scope (all vs exact),
alternatives OR'd, the untagged scope never claimed, empty strategies ignored, the first match winning
whole, the legacy `observation_scope_limits` as a cap fallback, strict vs lenient parsing, and the
preview's counts."""

from __future__ import annotations

from typing import Any

import pytest

from engram.consolidate.strategies import (
    ScopeRule,
    Strategy,
    parse_scope_limits,
    parse_strategies,
    preview,
    settings_for_scope,
    winning_strategy,
)
from engram.settings import BANK_SETTINGS

BANK = {name: setting.default for name, setting in BANK_SETTINGS.items()}


def config(**overrides: Any) -> dict[str, Any]:
    return {**BANK, **overrides}


def handler(raw: list[dict[str, Any]], tags: tuple[str, ...]) -> int | None:
    return winning_strategy(parse_strategies(raw, strict=True), tags)


COMPANY_AND_TEAM = ("company:acme", "team:exec")
DANA_ALL = ("company:acme", "team:exec", "user:dana")


@pytest.mark.parametrize(
    ("tags_match", "scope", "matches"),
    [
        # the seed's table for {"tags": ["company:*", "team:*"]}
        ("all", COMPANY_AND_TEAM, True),
        ("all", DANA_ALL, True),
        ("all", ("company:acme",), False),  # no team
        ("exact", COMPANY_AND_TEAM, True),
        ("exact", DANA_ALL, False),  # extra user: tag
        ("exact", ("company:acme",), False),
    ],
)
def test_tags_match_all_vs_exact(tags_match: str, scope: tuple[str, ...], matches: bool) -> None:
    assert ScopeRule(["company:*", "team:*"], tags_match).matches(scope) is matches  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scope", "handled"),
    [
        (("company:acme",), 0),  # only a company: the exact alternative
        (("company:acme", "user:dana"), None),  # a company with something else, no team
        (("team:exec",), 0),
        (("team:exec", "user:dana"), 0),  # a team among other tags
        (("user:dana",), None),
    ],
)
def test_one_strategy_can_mix_modes_across_alternatives(scope: tuple[str, ...], handled: int | None) -> None:
    mixed = [{"scopes": [{"tags": ["company:*"], "tags_match": "exact"}, {"tags": ["team:*"]}],
              "observations_mission": "m"}]
    assert handler(mixed, scope) == handled


@pytest.mark.parametrize("rule", [{"tags": ["*"]}, {"tags": ["*"], "tags_match": "exact"}, {"tags": ["company:*"]}])
def test_the_untagged_scope_is_never_claimed(rule: dict[str, Any]) -> None:
    assert handler([{"scopes": [rule], "max_observations_per_scope": 3}], ()) is None
    assert settings_for_scope((), config(consolidation_strategies=[{"scopes": [rule], "observations_mission": "x"}],
                                         observations_mission="bank")).observations_mission == "bank"


@pytest.mark.parametrize(
    "first",
    [
        {"scopes": [{"tags": ["company:*"]}]},  # sets nothing
        {"scopes": [{"tags": ["company:*"]}], "observations_mission": "   "},  # a blank mission sets nothing
        {"scopes": [{"tags": []}], "max_observations_per_scope": 1},  # a rule with no tags yet
        {"scopes": [], "max_observations_per_scope": 1},
    ],
)
def test_an_incomplete_strategy_is_ignored_and_does_not_block_later_ones(first: dict[str, Any]) -> None:
    later = {"scopes": [{"tags": ["company:*"]}], "observations_mission": "general trends"}
    assert handler([first, later], ("company:acme",)) == 1
    assert parse_strategies([first], strict=True)[0].active is False


SEED_FIRST_WINS = [
    {"scopes": [{"tags": ["company:acme"]}], "max_observations_per_scope": 5},
    {"scopes": [{"tags": ["company:*"]}], "observations_mission": "Record only general trends."},
]


@pytest.mark.parametrize(
    ("scope", "mission", "cap", "index"),
    [
        # the first match wins whole: the cap of 5, and the bank-wide mission, not the later one's
        (("company:acme",), "Bank-wide mission.", 5, 0),
        (("company:globex",), "Record only general trends.", -1, 1),
        (("team:exec",), "Bank-wide mission.", -1, None),
    ],
)
def test_first_matching_strategy_wins_whole(scope: tuple[str, ...], mission: str, cap: int, index: int | None) -> None:
    settings = settings_for_scope(scope, config(consolidation_strategies=SEED_FIRST_WINS,
                                                observations_mission="Bank-wide mission."))
    assert (settings.observations_mission, settings.max_observations_per_scope, settings.strategy_index) == (
        mission, cap, index)


def test_unset_values_come_from_the_bank_never_a_later_strategy() -> None:
    strategies = [
        {"scopes": [{"tags": ["team:*"]}], "consolidation_source_facts_max_tokens": 2000},
        {"scopes": [{"tags": ["team:*"]}], "observations_mission": "later",
         "consolidation_source_facts_max_tokens_per_observation": 300},
    ]
    settings = settings_for_scope(("team:exec",), config(
        consolidation_strategies=strategies, consolidation_source_facts_max_tokens_per_observation=700))
    assert settings.source_facts_max_tokens == 2000
    assert settings.source_facts_max_tokens_per_observation == 700
    assert settings.observations_mission is None


@pytest.mark.parametrize(
    ("scope", "cap"),
    [
        # a strategy claiming without a cap leaves it to observation_scope_limits…
        (("team:exec",), 7),
        # …past a later strategy that would have set one
        (("team:ops",), 9),
        # limits are exact cover: an extra tag is not covered, so the bank-wide cap applies
        (("team:exec", "user:dana"), 50),
        # the winning strategy's own cap beats any limit
        (("company:acme",), 2),
    ],
)
def test_a_strategy_without_a_cap_falls_back_to_scope_limits(scope: tuple[str, ...], cap: int) -> None:
    strategies = [
        {"scopes": [{"tags": ["team:*"]}], "observations_mission": "decisions"},
        {"scopes": [{"tags": ["team:*"]}], "max_observations_per_scope": 1},
        {"scopes": [{"tags": ["company:*"]}], "max_observations_per_scope": 2},
    ]
    limits = [{"tags": ["team:exec"], "max_observations": 7}, {"scope": ["team:*"], "limit": 9},
              {"tags": ["company:*"], "max_observations": 4}]
    settings = settings_for_scope(scope, config(consolidation_strategies=strategies, observation_scope_limits=limits,
                                                max_observations_per_scope=50))
    assert settings.max_observations_per_scope == cap


@pytest.mark.parametrize(
    ("patterns", "scope", "matches"),
    [
        (["team:*"], ("team:exec",), True),
        (["team:*"], ("team:exec", "user:dana"), False),  # user:dana is not covered
        (["team:*", "user:*"], ("team:exec",), False),  # user:* covers nothing
        (["team:*", "user:*"], ("team:exec", "user:dana"), True),
        ([], (), False),  # the untagged scope always uses the bank-wide values
    ],
)
def test_scope_limits_match_by_exact_cover(patterns: list[str], scope: tuple[str, ...], matches: bool) -> None:
    [limit] = parse_scope_limits([{"tags": patterns, "max_observations": 1}], strict=True)
    assert limit.matches(scope) is matches


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"scope": [{"tags": ["a"]}]}], "consolidation_strategies[0].scope: unknown key (did you mean 'scopes'?)"),
        ([{"scopes": [{"tags": "company:*"}]}],
         "consolidation_strategies[0].scopes[0].tags: must be a list of strings"),
        ([{"scopes": [{"tags": ["a", 1]}]}], "consolidation_strategies[0].scopes[0].tags: must be a list of strings"),
        ([{"scopes": [{"tags": ["a"]}]}, {"scopes": [{"tags": ["b"], "tags_match": "any"}]}],
         "consolidation_strategies[1].scopes[0].tags_match: must be 'all' or 'exact'"),
        ([{"scopes": [{"tags": ["a"], "match": "all"}]}], "consolidation_strategies[0].scopes[0].match: unknown key"),
        ([{"scopes": [{"tags": ["a"]}], "max_observations_per_scope": "5"}],
         "consolidation_strategies[0].max_observations_per_scope: must be an integer"),
        ([{"scopes": [{"tags": ["a"]}], "consolidation_source_facts_max_tokens": True}],
         "consolidation_strategies[0].consolidation_source_facts_max_tokens: must be an integer"),
        ([{"observations_mission": 3}], "consolidation_strategies[0].observations_mission: must be a string"),
        ([{"scopes": {"tags": ["a"]}}], "consolidation_strategies[0].scopes: must be a list"),
        (["company:*"], "consolidation_strategies[0]: must be an object"),
        ({"scopes": []}, "consolidation_strategies: must be a list"),
    ],
)
def test_strict_parsing_names_the_offending_entry(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_strategies(raw, strict=True)
    assert str(error.value).startswith(message)


def test_strict_parsing_keeps_incomplete_entries() -> None:
    parsed = parse_strategies([{}, {"scopes": [{}]}, {"scopes": [{"tags": None, "tags_match": None}]}], strict=True)
    assert [len(s.rules) for s in parsed] == [0, 1, 1]
    assert not any(s.active for s in parsed)


def test_lenient_parsing_drops_malformed_entries_and_defaults_an_unknown_tags_match() -> None:
    raw = [
        {"scope": [{"tags": ["company:*"]}], "observations_mission": "typo'd key"},
        {"scopes": [{"tags": "team:*"}], "observations_mission": "tags not a list"},
        "not an object",
        {"scopes": [{"tags": ["team:*", "user:*"], "tags_match": "exactly"}], "observations_mission": "kept"},
    ]
    [kept] = parse_strategies(raw, strict=False)
    assert kept.observations_mission == "kept"
    assert kept.rules == [ScopeRule(["team:*", "user:*"], "all")]
    assert parse_strategies({"not": "a list"}, strict=False) == []


def test_stored_strategies_are_resolved_leniently_at_use() -> None:
    stored = [{"scopes": [{"tags": ["company:*"]}], "max_observations_per_scope": "20"},  # malformed: dropped
              {"scopes": [{"tags": ["company:*"]}], "observations_mission": "general trends"}]
    settings = settings_for_scope(("company:acme",), config(consolidation_strategies=stored))
    assert (settings.strategy_index, settings.observations_mission) == (0, "general trends")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"max_observations": 3}], "observation_scope_limits[0].tags: required"),
        ([{"tags": "team:*", "max_observations": 3}], "observation_scope_limits[0].tags: must be a list of strings"),
        ([{"tags": ["a"]}], "observation_scope_limits[0].max_observations: required"),
        ([{"tags": ["a"], "limit": "3"}], "observation_scope_limits[0].max_observations: must be an integer"),
    ],
)
def test_scope_limits_strict_errors(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_scope_limits(raw, strict=True)
    assert str(error.value).startswith(message)
    assert parse_scope_limits(raw, strict=False) == []


def test_bank_config_api_refuses_malformed_strategies_with_the_entry_as_field() -> None:
    from engram.bank_config import validate_updates
    from engram.errors import InvalidInput

    with pytest.raises(InvalidInput) as error:
        validate_updates({"consolidation_strategies": [{"scopes": [{"tags": ["a"], "tags_match": "any"}]}]})
    assert error.value.field == "updates.consolidation_strategies[0].scopes[0].tags_match"
    with pytest.raises(InvalidInput) as error:
        validate_updates({"observation_scope_limits": [{"tags": ["a"]}]})
    assert error.value.field == "updates.observation_scope_limits[0].max_observations"


SCOPES = [
    (("user:dana",), 12),
    (("company:acme",), 9),
    (("company:globex",), 4),
    (("company:acme", "team:exec"), 3),
    (("team:exec",), 2),
    ((), 1),
]


def test_preview_counts_matches_claims_and_what_earlier_strategies_take() -> None:
    strategies = parse_strategies([
        {"scopes": [{"tags": ["company:acme"]}], "max_observations_per_scope": 5},
        {"scopes": [{"tags": ["company:*"], "tags_match": "exact"}, {"tags": ["team:*"]}],
         "observations_mission": "Record only general trends."},
        {"scopes": [{"tags": ["user:*"]}]},  # sets nothing: inactive, shows what it would match
    ], strict=True)
    result = preview(strategies, SCOPES, sample_limit=2, complete=True)

    first, second, third = result["strategies"]
    assert (first["active"], first["claimed_count"]) == (True, 2)
    assert first["rules"] == [{"match_count": 2, "taken_count": 0, "observation_count": 12, "samples": [
        {"tags": ["company:acme"], "count": 9, "handled_by": 0},
        {"tags": ["company:acme", "team:exec"], "count": 3, "handled_by": 0}]}]

    assert (second["active"], second["claimed_count"]) == (True, 2)  # globex, team:exec
    exact, team = second["rules"]
    assert (exact["match_count"], exact["taken_count"], exact["observation_count"]) == (2, 1, 13)
    assert [s["handled_by"] for s in exact["samples"]] == [0, 1]
    assert (team["match_count"], team["taken_count"], team["observation_count"]) == (2, 1, 5)

    assert (third["active"], third["claimed_count"]) == (False, 0)
    assert third["rules"][0]["match_count"] == 1
    assert third["rules"][0]["samples"] == [{"tags": ["user:dana"], "count": 12, "handled_by": None}]

    assert result["default"] == {"match_count": 2, "observation_count": 13, "samples": [
        {"tags": ["user:dana"], "count": 12, "handled_by": None}, {"tags": [], "count": 1, "handled_by": None}]}
    assert (result["scopes_scanned"], result["complete"]) == (6, True)


def test_preview_of_no_strategies_puts_everything_in_default() -> None:
    result = preview([], SCOPES, sample_limit=0, complete=False)
    assert result == {"strategies": [], "default": {"match_count": 6, "observation_count": 31, "samples": []},
                      "scopes_scanned": 6, "complete": False}


def test_dataclasses_default_to_unset() -> None:
    assert Strategy().sets_anything is False
    assert ScopeRule(["a"]).tags_match == "all"
