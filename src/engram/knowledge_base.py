"""The knowledge base: folders and pages in a tree, where a page is a mental model placed in it (its
content is the mental model's, generated and refreshed the same way). Rendering: a page as markdown
with YAML front matter, the tree as nested nodes, the whole base as a bundle of markdown files."""

from __future__ import annotations

import json
import re
from typing import Any

from engram.recall.rows import iso


def node(row: Any) -> dict[str, Any]:
    page = row["kind"] == "page"
    return {
        "id": row["id"], "kind": row["kind"], "name": row["name"], "parent_id": row["parent_id"],
        "mental_model_id": row["mental_model_id"], "managed": False,
        "description": row["source_query"] if page else None, "tags": list(row["tags"] or []) if page else [],
        "timestamp": iso(row["last_refreshed_at"]) if page else iso(row["updated_at"]),
        "is_stale": None, "last_refresh_failed_at": iso(row["last_refresh_failed_at"]) if page else None,
        "trigger": (row["trigger"] or None) if page else None, "children": [],
    }


def tree(rows: list[Any]) -> list[dict[str, Any]]:
    """Nested nodes, folders first then pages, each by name (the rows' order)."""
    nodes = {row["id"]: node(row) for row in rows}
    roots = []
    for item in nodes.values():
        parent = nodes.get(item["parent_id"]) if item["parent_id"] else None
        (parent["children"] if parent else roots).append(item)
    return roots


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string or list is valid YAML


def markdown(row: Any) -> str:
    front = {"id": row["id"], "name": row["name"], "type": "page", "mental_model_id": row["mental_model_id"],
             "source_query": row["source_query"], "tags": list(row["tags"] or []),
             "updated_at": iso(row["last_refreshed_at"])}
    lines = ["---", *(f"{key}: {_yaml_scalar(value)}" for key, value in front.items()), "---", ""]
    return "\n".join(lines) + (row["content"] or "") + "\n"


def page(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "type": "page", "description": row["source_query"],
            "tags": list(row["tags"] or []), "timestamp": iso(row["last_refreshed_at"]), "body": row["content"],
            "markdown": markdown(row)}


def slug(name: str) -> str:
    cleaned = re.sub(r"[^\w\- ]+", "", name, flags=re.UNICODE).strip().replace(" ", "-").lower()
    return cleaned or "untitled"


def bundle(rows: list[Any]) -> list[dict[str, str]]:
    """Every page as `folder/sub-folder/page.md`; names that collide get `-2`, `-3`, …"""
    by_id = {row["id"]: row for row in rows}
    taken: set[str] = set()
    files = []
    for row in rows:
        if row["kind"] != "page":
            continue
        parts, parent = [], by_id.get(row["parent_id"]) if row["parent_id"] else None
        while parent is not None:
            parts.insert(0, slug(parent["name"]))
            parent = by_id.get(parent["parent_id"]) if parent["parent_id"] else None
        base = "/".join([*parts, slug(row["name"])])
        path, n = f"{base}.md", 1
        while path in taken:
            n += 1
            path = f"{base}-{n}.md"
        taken.add(path)
        files.append({"path": path, "content": markdown(row)})
    return files
