"""Entity labels: a bank's controlled vocabulary (`entity_labels` in its config).

A label group has a key, a type — `value` (one of the values), `multi-values` (several), `text`
(open vocabulary under a fixed key) or `map` (named, typed fields, recursively) — and for enum types
the allowed values. Each matched value becomes an entity `key:value` (`key:field:value` for map
fields); `tag: true` also writes it into the memory's tags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

LabelType = Literal["value", "multi-values", "text", "map"]
ENUM_TYPES = ("value", "multi-values")
MAX_DEPTH = 4
# Every fact is matched against every value, and the vocabulary goes into extraction prompts.
MAX_GROUPS = 64
MAX_VALUES = 256  # per group or field
MAX_FIELDS = 32  # per map


class LabelValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(min_length=1)
    description: str | None = None


class LabelField(BaseModel):
    """A typed field of a map group (itself a value, multi-values, text or nested map)."""

    model_config = ConfigDict(extra="forbid")
    type: LabelType = "value"
    description: str | None = None
    values: list[LabelValue] = Field(default_factory=list)
    fields: dict[str, LabelField] | None = None


class LabelGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")
    description: str | None = None
    type: LabelType = "value"
    optional: bool = True
    tag: bool = False
    values: list[LabelValue] = Field(default_factory=list)
    fields: dict[str, LabelField] | None = None


def _shape_problem(where: str, kind: str, values: list[LabelValue], fields: dict[str, LabelField] | None,
                   depth: int) -> str | None:
    """What is wrong with one group or field's shape, or None."""
    if len(values) > MAX_VALUES:
        return f"{where}.values: at most {MAX_VALUES} values (got {len(values)})"
    if fields and len(fields) > MAX_FIELDS:
        return f"{where}.fields: at most {MAX_FIELDS} fields (got {len(fields)})"
    if kind in ENUM_TYPES:
        if not values:
            return f"{where}.values: a '{kind}' label needs at least one allowed value"
        names = [v.value for v in values]
        if len(set(names)) != len(names):
            return f"{where}.values: duplicate values"
        if fields:
            return f"{where}.fields: only 'map' labels have fields"
    elif kind == "map":
        if not fields:
            return f"{where}.fields: a 'map' label needs fields"
        if depth >= MAX_DEPTH:
            return f"{where}: maps nest at most {MAX_DEPTH} levels deep"
        for name, field in fields.items():
            if not name or ":" in name:
                return f"{where}.fields: field names must be non-empty and contain no ':'"
            problem = _shape_problem(f"{where}.fields.{name}", field.type, field.values, field.fields, depth + 1)
            if problem:
                return problem
    elif fields:
        return f"{where}.fields: only 'map' labels have fields"
    return None


def parse_label_groups(raw: Any, where: str = "entity_labels") -> list[LabelGroup]:
    """Validate a config value; raises ValueError naming the offending entry."""
    if not isinstance(raw, list):
        raise ValueError(f"{where}: must be a list of label groups")
    if len(raw) > MAX_GROUPS:
        raise ValueError(f"{where}: at most {MAX_GROUPS} label groups (got {len(raw)})")
    groups: list[LabelGroup] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        try:
            group = LabelGroup.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            location = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{at}.{location}: {first['msg']}" if location else f"{at}: {first['msg']}") from None
        if group.key in seen:
            raise ValueError(f"{at}.key: duplicate key '{group.key}'")
        seen.add(group.key)
        problem = _shape_problem(at, group.type, group.values, group.fields, 1)
        if problem:
            raise ValueError(problem)
        groups.append(group)
    return groups


def groups_from_config(config: dict[str, Any]) -> list[LabelGroup]:
    """The bank's label groups; a config that no longer validates yields none (and retain goes on)."""
    raw = config.get("entity_labels")
    if not raw:
        return []
    try:
        return parse_label_groups(raw)
    except ValueError:
        return []
