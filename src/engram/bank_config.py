"""A bank's effective configuration: environment defaults overridden by the bank's own values, and
validation of the overrides a caller sends (PATCH …/config, bank PUT, templates) against the schema
of `engram.bank_schema`."""

from __future__ import annotations

import logging
from typing import Any

from engram.errors import InvalidInput
from engram.settings import BANK_SETTINGS, normalise_setting_name

log = logging.getLogger("engram.config")

# Checks beyond the JSON type, run on PATCH. Each raises ValueError("<path>: <problem>"), the path
# starting with the setting's name (e.g. "entity_labels[2].values: ..."). Features that own a
# structured setting (entity labels, consolidation strategies) register theirs here.
ValueCheck = Any
VALUE_CHECKS: dict[str, ValueCheck] = {}


def _register_checks() -> None:
    from engram.consolidate.scopes import validate_scope_spec
    from engram.consolidate.strategies import check_scope_limits, check_strategies
    from engram.retain.label_config import parse_label_groups

    VALUE_CHECKS["entity_labels"] = parse_label_groups
    VALUE_CHECKS["consolidation_strategies"] = check_strategies
    VALUE_CHECKS["observation_scope_limits"] = check_scope_limits
    VALUE_CHECKS["default_observation_scopes"] = lambda raw: validate_scope_spec(raw, "default_observation_scopes")
    VALUE_CHECKS["retain_strategies"] = check_retain_strategies


def check_retain_strategies(raw: dict[str, Any]) -> None:
    """Each named retain strategy overrides bank settings: the same ranges apply. Keys that are not
    bank settings are ignored, as Hindsight does."""
    for name, overrides in raw.items():
        if not isinstance(overrides, dict):
            raise ValueError(f"retain_strategies.{name}: must be an object of settings")
        for key, value in overrides.items():
            setting = BANK_SETTINGS.get(key)
            problem = setting.problem(value) if setting is not None else None
            if problem is not None:
                raise ValueError(f"retain_strategies.{name}.{key}: {problem}")


_register_checks()


def resolve_config(
    env_defaults: dict[str, Any], overrides: dict[str, Any], bank_id: str | None = None
) -> dict[str, Any]:
    """The config a bank runs with: every known setting, bank override first. A stored override that
    is no longer valid (saved by an older version, or written by hand) is ignored: the bank runs with
    the environment's value for that key, and the problem is logged once."""
    resolved = dict(env_defaults)
    invalid = invalid_overrides(overrides)
    resolved.update({k: v for k, v in overrides.items() if k in BANK_SETTINGS and k not in invalid})
    for key, problem in invalid.items():
        _log_once(bank_id, key, overrides[key], problem)
    return resolved


def invalid_overrides(overrides: dict[str, Any]) -> dict[str, str]:
    """The stored overrides that fail the schema, each with why (GET …/config shows them)."""
    invalid = {}
    for key, value in overrides.items():
        setting = BANK_SETTINGS.get(key)
        problem = setting.problem(value) if setting is not None else None
        if problem is not None:
            invalid[key] = f"{problem}; ignored, the default is used"
    return invalid


_LOGGED: set[tuple[str | None, str, str]] = set()


def _log_once(bank_id: str | None, key: str, value: Any, problem: str) -> None:
    marker = (bank_id, key, repr(value)[:200])
    if marker in _LOGGED or len(_LOGGED) > 10_000:
        return
    _LOGGED.add(marker)
    log.warning("bank %s: stored setting %s=%.100r %s", bank_id or "?", key, value, problem)


def validate_updates(updates: dict[str, Any], where: str = "updates") -> dict[str, Any]:
    """Normalise keys (field names or HINDSIGHT_API_*/ENGRAM_* names) and check every value against
    its type and range (`engram.bank_schema`) and its structure check.

    Raises InvalidInput naming every unknown key, or the first invalid value as `<where>.<key>` (just
    `<key>` when `where` is empty); nothing is saved unless all of them are valid.
    """
    prefix = f"{where}." if where else ""
    normalised = {normalise_setting_name(key): value for key, value in updates.items()}
    unknown = sorted(key for key in updates if normalise_setting_name(key) not in BANK_SETTINGS)
    if unknown:
        raise InvalidInput(where or "body", f"unknown config keys: {', '.join(unknown)}")
    for key, value in normalised.items():
        problem = BANK_SETTINGS[key].problem(value)
        if problem is not None:
            raise InvalidInput(f"{prefix}{key}", problem)
        check = VALUE_CHECKS.get(key)
        if check is None or value is None:
            continue
        try:
            check(value)
        except ValueError as exc:
            path, _, problem = str(exc).partition(": ")
            raise InvalidInput(f"{prefix}{path}", problem or str(exc)) from None
    return normalised
