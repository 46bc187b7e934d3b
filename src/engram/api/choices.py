"""The allowed values of the routes' string parameters. An unknown value is a 400 naming the
parameter and listing what it takes, never a silently ignored filter; the OpenAPI document lists the
same values as an `enum` (Hindsight's own where its contract has one)."""

from __future__ import annotations

from typing import Any

from fastapi import Query

from engram.errors import InvalidInput

TAGS_MATCH = ("any", "all", "any_strict", "all_strict", "exact")
TAGS_MATCH_SIMPLE = ("any", "all", "exact")  # mental models and directives, as in Hindsight's contract
FACT_TYPES = ("world", "experience", "observation")
# Hindsight's `done` and Engram's earlier `consolidated` name the same state.
CONSOLIDATION_STATES = ("pending", "done", "consolidated", "failed")
MEMORY_STATES = ("valid", "invalidated")
MEMORY_TIME_FIELDS = ("created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end")
DOCUMENT_TIME_FIELDS = ("created_at", "updated_at")
ENTITY_SORTS = ("mentions", "name", "recent")
TAG_SOURCES = ("memories", "mental_models")
OPERATION_STATUSES = ("pending", "processing", "completed", "failed", "cancelled")
MENTAL_MODEL_DETAILS = ("metadata", "content", "full")


def one_of(value: str | None, allowed: tuple[str, ...], field: str) -> str | None:
    """`value` itself when it is one of `allowed` (or None: the parameter was not given)."""
    if value is not None and value not in allowed:
        raise InvalidInput(field, f"must be one of {', '.join(allowed)} (got {value!r})")
    return value


def choice(default: str | None, allowed: tuple[str, ...], **extra: Any) -> Any:
    """A query parameter documented with its `enum`; the route checks it with `one_of`."""
    return Query(default, json_schema_extra={"enum": list(allowed)}, **extra)
