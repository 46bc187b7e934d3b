"""A bank's effective configuration: environment defaults overridden by the bank's own values, and
validation of the overrides a caller sends (PATCH …/config)."""

from __future__ import annotations

from typing import Any

from engram.errors import InvalidInput
from engram.settings import BANK_SETTINGS, BankSetting, normalise_setting_name

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


_register_checks()


def resolve_config(env_defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The config a bank runs with: every known setting, bank override first."""
    resolved = dict(env_defaults)
    resolved.update({k: v for k, v in overrides.items() if k in BANK_SETTINGS})
    return resolved


def _type_ok(setting: BankSetting, value: Any) -> bool:
    if value is None:
        return True
    kinds = setting.kind if isinstance(setting.kind, tuple) else (setting.kind,)
    for kind in kinds:
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind not in (int, float) and isinstance(value, kind):
            return True
    return False


def _kind_name(setting: BankSetting) -> str:
    kinds = setting.kind if isinstance(setting.kind, tuple) else (setting.kind,)
    names = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
    return " or ".join(names[k] for k in kinds)


def validate_updates(updates: dict[str, Any]) -> dict[str, Any]:
    """Normalise keys (field names or HINDSIGHT_API_*/ENGRAM_* names) and check every value.

    Raises InvalidInput naming every unknown key, or the first value of the wrong type; nothing is
    saved unless all of them are valid.
    """
    normalised = {normalise_setting_name(key): value for key, value in updates.items()}
    unknown = sorted(key for key in updates if normalise_setting_name(key) not in BANK_SETTINGS)
    if unknown:
        raise InvalidInput("updates", f"unknown config keys: {', '.join(unknown)}")
    for key, value in normalised.items():
        setting = BANK_SETTINGS[key]
        if not _type_ok(setting, value):
            raise InvalidInput(f"updates.{key}", f"must be a {_kind_name(setting)}")
        check = VALUE_CHECKS.get(key)
        if check is None or value is None:
            continue
        try:
            check(value)
        except ValueError as exc:
            path, _, problem = str(exc).partition(": ")
            raise InvalidInput(f"updates.{path}", problem or str(exc)) from None
    return normalised
