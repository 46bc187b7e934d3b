"""Which memory units a recall may see: bank, fact types, tags and tag groups, as one SQL condition."""

from __future__ import annotations

from dataclasses import dataclass

from engram.store.sql import SqlParams, tag_group_condition, tags_condition
from engram.types import TagGroup


@dataclass
class UnitFilter:
    """Which memory units a query may see."""

    bank_id: str
    fact_types: list[str]
    tags: list[str] | None = None
    tags_match: str = "any"
    tag_groups: list[TagGroup] | None = None

    def sees_whole_fact_types(self) -> bool:
        """Whether the scope is every valid fact of its types (no tag filter narrows it)."""
        return tags_condition(SqlParams(), self.tags, self.tags_match) == "TRUE" and not self.tag_groups

    def where(self, params: SqlParams, alias: str = "m") -> str:
        column = f"{alias}.tags"
        parts = [
            f"{alias}.bank_id = {params.add(self.bank_id)}",
            f"{alias}.fact_type = ANY({params.add(self.fact_types)}::text[])",
            f"{alias}.state = 'valid'",
        ]
        condition = tags_condition(params, self.tags, self.tags_match, column)
        if condition != "TRUE":
            parts.append(condition)
        for group in self.tag_groups or []:
            parts.append(tag_group_condition(params, group, column))
        return " AND ".join(parts)

    def holds(self, params: SqlParams, unit_id: str) -> str:
        """A scalar subquery, true when the fact whose id is the SQL `unit_id` is in scope, else null:
        one primary-key lookup, the scope checked on the row it finds. With the scope inside the
        lookup, the planner may read the fact through one of the bank's indexes instead, which it does
        where its statistics hold no count for the bank (one grown by small retains since the table
        was last analysed): every fact of the bank for each fact checked."""
        return (f"(SELECT true FROM (SELECT * FROM memory_units WHERE id = {unit_id} OFFSET 0) m "
                f"WHERE {self.where(params)})")
