"""SQL building blocks: bound parameters, and tag filters with their match modes and boolean groups.

Tag semantics: `any` / `all` keep untagged memories, `any_strict` / `all_strict` drop them, `exact`
wants the same set of tags (`tags: []` with `exact` = untagged only). No tags (None or []) with any
other mode filters nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engram.errors import InvalidInput
from engram.types import TagGroup, TagGroupAnd, TagGroupLeaf, TagGroupNot, TagGroupOr


@dataclass
class SqlParams:
    """Collects bound parameters and hands out their `$n` placeholders."""

    values: list[Any] = field(default_factory=list)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def like_pattern(text: str, *, star_wildcard: bool = False) -> str:
    """An ILIKE pattern for a search string: `text` anywhere, its `%`, `_` and `\\` taken literally.
    With `star_wildcard` and a `*` in `text`, `*` matches any run and the pattern is anchored, so
    `user:*` finds tags that start with "user:" (Hindsight's tag search)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    if star_wildcard and "*" in escaped:
        return escaped.replace("*", "%")
    return f"%{escaped}%"


def tags_condition(params: SqlParams, tags: list[str] | None, match: str, column: str = "m.tags") -> str:
    """A boolean SQL expression for one tag filter ('TRUE' when it filters nothing)."""
    if match == "exact":
        if tags is None:
            return "TRUE"
        wanted = sorted(set(tags))
        if not wanted:
            return f"cardinality({column}) = 0"
        ref = params.add(wanted)
        return f"({column} @> {ref}::text[] AND {column} <@ {ref}::text[])"
    if not tags:
        return "TRUE"
    ref = params.add(list(dict.fromkeys(tags)))
    untagged = f"cardinality({column}) = 0"
    if match == "any":
        return f"({untagged} OR {column} && {ref}::text[])"
    if match == "all":
        return f"({untagged} OR {column} @> {ref}::text[])"
    if match == "any_strict":
        return f"({column} && {ref}::text[])"
    if match == "all_strict":
        return f"({column} @> {ref}::text[])"
    raise InvalidInput("tags_match", f"must be one of any, all, any_strict, all_strict, exact (got {match!r})")


def tag_group_condition(params: SqlParams, group: TagGroup, column: str = "m.tags") -> str:
    if isinstance(group, TagGroupLeaf):
        return tags_condition(params, group.tags, group.match, column)
    if isinstance(group, TagGroupAnd):
        parts = [tag_group_condition(params, g, column) for g in group.and_]
        return "(" + " AND ".join(parts or ["TRUE"]) + ")"
    if isinstance(group, TagGroupOr):
        parts = [tag_group_condition(params, g, column) for g in group.or_]
        return "(" + " OR ".join(parts or ["FALSE"]) + ")"
    if isinstance(group, TagGroupNot):
        return f"(NOT {tag_group_condition(params, group.not_, column)})"
    raise TypeError(f"not a tag group: {group!r}")
