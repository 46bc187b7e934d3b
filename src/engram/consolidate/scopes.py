"""Observation scopes: which tag sets a fact is consolidated under (`observation_scopes` at retain time,
the consolidate endpoint and the bank's `default_observation_scopes`).

Observations only ever build on facts and observations of their own scope, so this decides what
knowledge is shared between audiences: `combined` keeps one scope per exact tag set, `per_tag` lets
each tag accumulate its own observations, `shared` pools everything into the global scope.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from itertools import combinations
from typing import Union

Scope = tuple[str, ...]
"""Sorted, de-duplicated tags; `()` is the global (untagged) scope."""

SCOPE_MODES = ("combined", "per_tag", "all_combinations", "shared")
ScopeSpec = Union[str, list[list[str]], None]
"""None (= "combined"), one of SCOPE_MODES, or an explicit list of scopes (tag lists, globs allowed)."""

MAX_COMBINATION_TAGS = 6
"""`all_combinations` of n tags is 2^n - 1 scopes, each consolidated on its own: beyond 6 tags (63
scopes) a fact falls back to its single tags plus their full combination, so one heavily tagged fact
cannot fan out into hundreds of LLM calls."""

GLOB_CHARS = frozenset("*?[")


def as_scope(tags: list[str] | tuple[str, ...]) -> Scope:
    """The canonical form of a tag set: sorted, each tag once."""
    return tuple(sorted(set(tags)))


def is_glob(tag: str) -> bool:
    return any(char in GLOB_CHARS for char in tag)


def _expand(entry: list[str], fact_tags: Scope) -> Scope | None:
    """One explicit scope, globs replaced by the fact's tags they match; None when a glob matches none
    (the scope is about tags this fact does not have)."""
    tags: list[str] = []
    for pattern in entry:
        if not is_glob(pattern):
            tags.append(pattern)
            continue
        matched = [tag for tag in fact_tags if fnmatchcase(tag, pattern)]
        if not matched:
            return None
        tags.extend(matched)
    return as_scope(tags)


def _all_combinations(fact_tags: Scope) -> list[Scope]:
    if len(fact_tags) > MAX_COMBINATION_TAGS:
        return [(tag,) for tag in fact_tags] + [fact_tags]
    return [combo for size in range(1, len(fact_tags) + 1) for combo in combinations(fact_tags, size)]


def resolve_fact_scopes(spec: ScopeSpec, fact_tags: list[str] | tuple[str, ...]) -> list[Scope]:
    """The scopes a fact with these tags is consolidated under, in a stable order, each once.

    A fact with no tags is in the global scope `()` for every mode. An explicit list can name scopes the
    fact's tags do not contain (plain tags are kept as written); an entry whose glob matches none of the
    fact's tags is dropped, so the result is empty when every entry is dropped: the caller asked for
    scopes this fact is not part of, and the fact contributes to no observation. An empty explicit
    list carries no choice and is treated as unset ("combined").
    """
    tags = as_scope(list(fact_tags))
    if isinstance(spec, list) and spec:
        resolved = [_expand(entry, tags) for entry in spec]
        return list(dict.fromkeys(scope for scope in resolved if scope is not None))
    if spec == "shared" or not tags:
        return [()]
    if spec == "per_tag":
        return [(tag,) for tag in tags]
    if spec == "all_combinations":
        return list(dict.fromkeys(_all_combinations(tags)))
    return [tags]


def validate_scope_spec(raw: object, where: str) -> ScopeSpec:
    """A scope spec as callers send it, checked; raises ValueError("<where>...: <problem>") naming the
    offending entry. Returns the spec (lists copied, so later edits of `raw` do not leak in)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if raw in SCOPE_MODES:
            return raw
        raise ValueError(f"{where}: must be one of {', '.join(SCOPE_MODES)} or a list of tag lists, got {raw!r}")
    if not isinstance(raw, list):
        raise ValueError(f"{where}: must be one of {', '.join(SCOPE_MODES)} or a list of tag lists")
    spec: list[list[str]] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, list):
            raise ValueError(f"{where}[{index}]: must be a list of tags")
        for position, tag in enumerate(entry):
            if not isinstance(tag, str) or not tag:
                raise ValueError(f"{where}[{index}][{position}]: must be a non-empty string")
        spec.append(list(entry))
    return spec
