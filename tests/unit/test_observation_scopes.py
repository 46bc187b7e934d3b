"""Observation scopes: under which tag sets a fact is consolidated, for each `observation_scopes` mode,
explicit lists with globs, and the validation of what callers send."""

from __future__ import annotations

import pytest

from engram.consolidate.scopes import MAX_COMBINATION_TAGS, resolve_fact_scopes, validate_scope_spec

DANA = ["user:dana", "team:exec", "company:acme"]


@pytest.mark.parametrize(
    ("spec", "tags", "scopes"),
    [
        # combined (the default): one scope, all of the fact's tags, sorted and each once
        (None, DANA, [("company:acme", "team:exec", "user:dana")]),
        ("combined", ["b", "a", "b"], [("a", "b")]),
        # per_tag: each tag accumulates its own observations
        ("per_tag", DANA, [("company:acme",), ("team:exec",), ("user:dana",)]),
        # all_combinations: every non-empty subset, smallest first
        ("all_combinations", ["a", "b", "c"],
         [("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"), ("a", "b", "c")]),
        # shared: one global, untagged belief whatever the fact's tags
        ("shared", DANA, [()]),
        # a fact with no tags lands in the global scope in every mode
        (None, [], [()]),
        ("combined", [], [()]),
        ("per_tag", [], [()]),
        ("all_combinations", [], [()]),
        ("shared", [], [()]),
    ],
)
def test_scope_modes(spec: object, tags: list[str], scopes: list[tuple[str, ...]]) -> None:
    assert resolve_fact_scopes(spec, tags) == scopes


def test_all_combinations_of_many_tags_falls_back_to_single_tags_plus_the_whole_set() -> None:
    tags = [f"t{i}" for i in range(MAX_COMBINATION_TAGS + 1)]
    scopes = resolve_fact_scopes("all_combinations", tags)
    assert scopes == [(tag,) for tag in tags] + [tuple(tags)]
    assert len(resolve_fact_scopes("all_combinations", tags[:MAX_COMBINATION_TAGS])) == 2**MAX_COMBINATION_TAGS - 1


@pytest.mark.parametrize(
    ("spec", "tags", "scopes"),
    [
        # the seed's example: one fact, three single-tag scopes, none with both a company and a team
        ([["user:dana"], ["team:exec"], ["company:acme"]], DANA,
         [("user:dana",), ("team:exec",), ("company:acme",)]),
        # a glob expands to the fact's tags it matches
        ([["user:*"], ["company:*", "team:*"]], DANA, [("user:dana",), ("company:acme", "team:exec")]),
        ([["team:*"]], ["team:exec", "team:ops"], [("team:exec", "team:ops")]),
        # a glob that matches nothing drops the whole scope, whatever else it names
        ([["user:*", "company:acme"], ["company:*"]], ["company:acme"], [("company:acme",)]),
        # every scope dropped: the fact contributes to no observation
        ([["user:*"]], ["team:exec"], []),
        # plain tags are kept as written, even ones the fact does not carry
        ([["project:x"]], ["team:exec"], [("project:x",)]),
        # [] is the global scope; duplicates (after sorting) are resolved once, in order
        ([[], ["b", "a"], ["a", "b"]], ["a"], [(), ("a", "b")]),
        # an empty explicit list carries no choice: combined
        ([], ["b", "a"], [("a", "b")]),
    ],
)
def test_explicit_scopes_with_globs(spec: list[list[str]], tags: list[str], scopes: list[tuple[str, ...]]) -> None:
    assert resolve_fact_scopes(spec, tags) == scopes


@pytest.mark.parametrize("spec", [None, "combined", "per_tag", "all_combinations", "shared", [], [[]], [["a", "b*"]]])
def test_valid_scope_specs_pass_through(spec: object) -> None:
    assert validate_scope_spec(spec, "observation_scopes") == spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("per-tag", "observation_scopes: must be one of combined, per_tag, all_combinations, shared"),
        ({"tags": ["a"]}, "observation_scopes: must be one of"),
        (["a"], "observation_scopes[0]: must be a list of tags"),
        ([["a"], ["b", 3]], "observation_scopes[1][1]: must be a non-empty string"),
        ([[""]], "observation_scopes[0][0]: must be a non-empty string"),
    ],
)
def test_invalid_scope_specs_name_the_entry(spec: object, message: str) -> None:
    with pytest.raises(ValueError) as error:
        validate_scope_spec(spec, "observation_scopes")
    assert str(error.value).startswith(message)


def test_default_observation_scopes_is_checked_by_the_bank_config_api() -> None:
    from engram.bank_config import validate_updates
    from engram.errors import InvalidInput

    assert validate_updates({"default_observation_scopes": "per_tag"}) == {"default_observation_scopes": "per_tag"}
    with pytest.raises(InvalidInput) as error:
        validate_updates({"default_observation_scopes": [["a"], "b"]})
    assert error.value.field == "updates.default_observation_scopes[1]"
