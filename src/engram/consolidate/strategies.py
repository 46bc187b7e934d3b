"""Consolidation strategies: per-scope missions, caps and source-fact budgets (`consolidation_strategies`),
the older `observation_scope_limits`, and the preview that shows which strategy handles which scope.

One bank can serve several audiences: a company-wide scope must not be briefed like a person's own
scope. A strategy claims scopes by tag patterns; the first matching strategy wins, whole, and anything
it leaves unset comes from the bank-wide values, never from a later strategy.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from engram.consolidate.scopes import Scope
from engram.settings import BANK_SETTINGS

TagsMatch = Literal["all", "exact"]
TAGS_MATCH: tuple[str, ...] = ("all", "exact")
RULE_KEYS = ("tags", "tags_match")
INT_SETTINGS = (
    "max_observations_per_scope",
    "consolidation_source_facts_max_tokens",
    "consolidation_source_facts_max_tokens_per_observation",
)
STRATEGY_KEYS = ("scopes", "observations_mission", *INT_SETTINGS)
LIMIT_TAG_KEYS = ("tags", "scope")
LIMIT_CAP_KEYS = ("max_observations", "limit")


@dataclass
class ScopeRule:
    """One alternative of a strategy: every pattern must match a tag of the scope; with "exact", every
    tag of the scope must also be matched by a pattern."""

    tags: list[str]
    tags_match: TagsMatch = "all"

    def matches(self, scope: Scope) -> bool:
        # The untagged scope is never claimed, and a rule still being typed (no tags) claims nothing.
        if not scope or not self.tags:
            return False
        if not all(any(fnmatchcase(tag, pattern) for tag in scope) for pattern in self.tags):
            return False
        return self.tags_match != "exact" or all(
            any(fnmatchcase(tag, pattern) for pattern in self.tags) for tag in scope
        )


@dataclass
class Strategy:
    """Settings for the scopes any of `rules` matches; None = use the bank-wide value."""

    rules: list[ScopeRule] = field(default_factory=list)
    observations_mission: str | None = None
    max_observations_per_scope: int | None = None
    consolidation_source_facts_max_tokens: int | None = None
    consolidation_source_facts_max_tokens_per_observation: int | None = None

    @property
    def sets_anything(self) -> bool:
        return self.observations_mission is not None or any(getattr(self, name) is not None for name in INT_SETTINGS)

    @property
    def active(self) -> bool:
        """Whether it can claim a scope at all: an incomplete strategy is kept but must not block later ones."""
        return self.sets_anything and any(rule.tags for rule in self.rules)

    def matches(self, scope: Scope) -> bool:
        return self.active and any(rule.matches(scope) for rule in self.rules)


# --- parsing -----------------------------------------------------------------------------------------


def _check_keys(entry: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in entry:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"{where}.{key}: unknown key{hint}; expected {', '.join(allowed)}")


def _tag_list(raw: Any, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(tag, str) for tag in raw):
        raise ValueError(f"{where}: must be a list of strings")
    return list(raw)


def _parse_rule(raw: Any, where: str, strict: bool) -> ScopeRule:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be an object with 'tags' and optionally 'tags_match'")
    _check_keys(raw, RULE_KEYS, where)
    match = raw.get("tags_match") or "all"
    if match not in TAGS_MATCH:
        if strict:
            raise ValueError(f"{where}.tags_match: must be 'all' or 'exact'")
        match = "all"  # the env var is not validated: an unknown mode falls back to the default
    return ScopeRule(tags=_tag_list(raw.get("tags"), f"{where}.tags"), tags_match=match)


def _int_setting(raw: Any, where: str, setting: str) -> int | None:
    """A per-strategy value of bank setting `setting`: the same type and range as the bank-wide one."""
    problem = BANK_SETTINGS[setting].problem(raw)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    return raw


def _parse_strategy(raw: Any, where: str, strict: bool) -> Strategy:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be an object")
    _check_keys(raw, STRATEGY_KEYS, where)
    scopes = raw.get("scopes")
    if scopes is not None and not isinstance(scopes, list):
        raise ValueError(f"{where}.scopes: must be a list of {{tags, tags_match}} objects")
    mission = raw.get("observations_mission")
    if mission is not None and not isinstance(mission, str):
        raise ValueError(f"{where}.observations_mission: must be a string")
    return Strategy(
        rules=[_parse_rule(rule, f"{where}.scopes[{i}]", strict) for i, rule in enumerate(scopes or [])],
        # A blank mission is what a half-typed form saves: it sets nothing.
        observations_mission=mission if mission and mission.strip() else None,
        **{name: _int_setting(raw.get(name), f"{where}.{name}", name) for name in INT_SETTINGS},
    )


def parse_strategies(raw: Any, *, strict: bool, where: str = "consolidation_strategies") -> list[Strategy]:
    """Strategies from a config value, in priority order.

    strict (config API, preview): raises ValueError("<where>[i]...: <problem>") for the first malformed
    entry. Incomplete entries — a rule without tags, a strategy without settings — are kept; they claim
    nothing. Lenient (env var, stored config at use): a strategy strict parsing would reject is dropped
    whole, and an unknown tags_match means "all".
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        if strict:
            raise ValueError(f"{where}: must be a list of strategies")
        return []
    strategies: list[Strategy] = []
    for index, entry in enumerate(raw):
        try:
            strategies.append(_parse_strategy(entry, f"{where}[{index}]", strict))
        except ValueError:
            if strict:
                raise
    return strategies


def check_strategies(raw: Any) -> list[Strategy]:
    """VALUE_CHECKS entry for `consolidation_strategies`."""
    return parse_strategies(raw, strict=True)


@dataclass
class ScopeLimit:
    """A legacy `observation_scope_limits` entry: a cap for the scopes its patterns cover exactly."""

    patterns: list[str]
    max_observations: int

    def matches(self, scope: Scope) -> bool:
        if not scope or not self.patterns:
            return False
        return all(any(fnmatchcase(tag, p) for p in self.patterns) for tag in scope) and all(
            any(fnmatchcase(tag, p) for tag in scope) for p in self.patterns
        )


def _first_key(entry: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((entry[key] for key in keys if entry.get(key) is not None), None)


def parse_scope_limits(raw: Any, *, strict: bool, where: str = "observation_scope_limits") -> list[ScopeLimit]:
    """Legacy limits ({"tags"|"scope": [patterns], "max_observations"|"limit": N}). Other keys are
    ignored, since older configs carried free-form extras; strict raises for a missing or mistyped
    pattern list or cap, lenient drops that entry."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        if strict:
            raise ValueError(f"{where}: must be a list of {{tags, max_observations}} objects")
        return []
    limits: list[ScopeLimit] = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        try:
            if not isinstance(entry, dict):
                raise ValueError(f"{at}: must be an object with 'tags' and 'max_observations'")
            patterns = _first_key(entry, LIMIT_TAG_KEYS)
            if patterns is None:
                raise ValueError(f"{at}.tags: required")
            patterns = _tag_list(patterns, f"{at}.tags")
            cap = _int_setting(_first_key(entry, LIMIT_CAP_KEYS), f"{at}.max_observations",
                               "max_observations_per_scope")
            if cap is None:
                raise ValueError(f"{at}.max_observations: required")
            limits.append(ScopeLimit(patterns, cap))
        except ValueError:
            if strict:
                raise
    return limits


def check_scope_limits(raw: Any) -> list[ScopeLimit]:
    """VALUE_CHECKS entry for `observation_scope_limits`."""
    return parse_scope_limits(raw, strict=True)


# --- resolution --------------------------------------------------------------------------------------


def winning_strategy(strategies: list[Strategy], scope: Scope) -> int | None:
    """Index of the strategy that handles `scope`: the first one that matches, or None (Default)."""
    return next((i for i, strategy in enumerate(strategies) if strategy.matches(scope)), None)


@dataclass
class ScopeSettings:
    """What consolidation of one scope runs with. -1 means unlimited, as for the bank settings."""

    observations_mission: str | None
    max_observations_per_scope: int
    source_facts_max_tokens: int
    source_facts_max_tokens_per_observation: int
    strategy_index: int | None


def _bank_value(config: dict[str, Any], name: str) -> Any:
    value = config.get(name)
    return BANK_SETTINGS[name].default if value is None else value


def settings_for_scope(scope: Scope, config: dict[str, Any]) -> ScopeSettings:
    """The settings for `scope` under a bank's resolved config (as `resolve_config` returns it).

    Stored strategies and limits are read leniently: a bad entry must not stop consolidation. The cap
    comes from the winning strategy, else the first legacy limit that covers the scope, else the bank.
    """
    strategies = parse_strategies(config.get("consolidation_strategies"), strict=False)
    index = winning_strategy(strategies, scope)
    chosen = strategies[index] if index is not None else Strategy()
    cap = chosen.max_observations_per_scope
    if cap is None:
        limits = parse_scope_limits(config.get("observation_scope_limits"), strict=False)
        cap = next((limit.max_observations for limit in limits if limit.matches(scope)), None)
    tokens = chosen.consolidation_source_facts_max_tokens
    per_observation = chosen.consolidation_source_facts_max_tokens_per_observation
    return ScopeSettings(
        observations_mission=chosen.observations_mission or config.get("observations_mission"),
        max_observations_per_scope=_bank_value(config, "max_observations_per_scope") if cap is None else cap,
        source_facts_max_tokens=(
            _bank_value(config, "consolidation_source_facts_max_tokens") if tokens is None else tokens
        ),
        source_facts_max_tokens_per_observation=(
            _bank_value(config, "consolidation_source_facts_max_tokens_per_observation")
            if per_observation is None else per_observation
        ),
        strategy_index=index,
    )


# --- preview -----------------------------------------------------------------------------------------


def _sample(scope: Scope, count: int, handled_by: int | None) -> dict[str, Any]:
    return {"tags": list(scope), "count": count, "handled_by": handled_by}


def preview(
    strategies: list[Strategy], scopes: list[tuple[Scope, int]], sample_limit: int, complete: bool
) -> dict[str, Any]:
    """Which strategy handles each existing scope, shaped like the contract's ConsolidationStrategiesPreview.

    A rule's counts use the rule's own matching even when its strategy is not active yet (no setting or
    no tags), so a draft shows what it would claim; `claimed_count` and `handled_by` are what
    consolidation actually does. `scopes` come most observations first; samples keep that order.
    """
    handled = [(scope, count, winning_strategy(strategies, scope)) for scope, count in scopes]
    result_strategies = []
    for index, strategy in enumerate(strategies):
        rules = []
        for rule in strategy.rules:
            matched = [(scope, count, by) for scope, count, by in handled if rule.matches(scope)]
            rules.append({
                "match_count": len(matched),
                "taken_count": sum(1 for _, _, by in matched if by is not None and by < index),
                "observation_count": sum(count for _, count, _ in matched),
                "samples": [_sample(*item) for item in matched[:sample_limit]],
            })
        result_strategies.append({
            "active": strategy.active,
            "claimed_count": sum(1 for _, _, by in handled if by == index),
            "rules": rules,
        })
    unclaimed = [(scope, count, by) for scope, count, by in handled if by is None]
    return {
        "strategies": result_strategies,
        "default": {
            "match_count": len(unclaimed),
            "observation_count": sum(count for _, count, _ in unclaimed),
            "samples": [_sample(*item) for item in unclaimed[:sample_limit]],
        },
        "scopes_scanned": len(scopes),
        "complete": complete,
    }
