"""Helpers of the tests that check which plans PostgreSQL gives Engram's statements: a connection that
records the statements run on it, and the nodes of an EXPLAIN (FORMAT JSON) plan."""

from __future__ import annotations

from typing import Any

import asyncpg


class Recording:
    """A connection that keeps every statement run with parameters (not the SET LOCALs around them)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        """fetch, fetchrow, fetchval, execute: the statement kept when it has parameters, then run."""
        run = getattr(self.conn, name)

        async def recorded(sql: str, *args: Any) -> Any:
            if args:
                self.statements.append((sql, args))
            return await run(sql, *args)

        return recorded

    def transaction(self, **options: Any) -> Any:
        return self.conn.transaction(**options)


def plan_nodes(plan: Any) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    if isinstance(plan, list):
        return [node for item in plan for node in plan_nodes(item)]
    if not isinstance(plan, dict):
        return []
    nodes = [plan] if "Node Type" in plan else []
    return nodes + [node for value in plan.values() for node in plan_nodes(value)]
