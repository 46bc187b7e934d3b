"""Tag filters evaluated in Python, for lists the database does not filter (knowledge-base pages):
the same semantics as recall's SQL filters (`tags_match`, `tag_groups`)."""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from engram.errors import InvalidInput
from engram.types.memory import TagGroup, TagGroupAnd, TagGroupNot, TagGroupOr, TagGroups


def tags_match(have: list[str] | None, wanted: list[str], mode: str) -> bool:
    """`any` / `all` let untagged items through, `any_strict` / `all_strict` do not, `exact` wants the
    same set (`wanted` empty with `exact`: untagged only)."""
    own = set(have or [])
    if mode == "exact":
        return own == set(wanted)
    if not wanted:
        return True
    if not own:
        return mode in ("any", "all")
    return set(wanted) <= own if mode in ("all", "all_strict") else bool(own & set(wanted))


def group_matches(have: list[str] | None, group: TagGroup) -> bool:
    if isinstance(group, TagGroupAnd):
        return all(group_matches(have, child) for child in group.and_)
    if isinstance(group, TagGroupOr):
        return any(group_matches(have, child) for child in group.or_)
    if isinstance(group, TagGroupNot):
        return not group_matches(have, group.not_)
    return tags_match(have, group.tags, group.match)


def parse_tag_groups(text: str | None) -> list[TagGroup]:
    """`tag_groups` as a query parameter: a JSON list of groups, or a 400 naming it."""
    if not text:
        return []
    try:
        return TypeAdapter(TagGroups).validate_python(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise InvalidInput("tag_groups", f"must be a JSON list of tag groups ({str(exc).splitlines()[0]})") from None


def passes(have: list[str] | None, tags: list[str] | None, mode: str, groups: list[TagGroup]) -> bool:
    return (not tags or tags_match(have, tags, mode)) and all(group_matches(have, g) for g in groups)
