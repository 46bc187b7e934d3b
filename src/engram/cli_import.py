"""`engram import BANK FILE`: JSON / JSONL conversations and text / markdown files into a bank, in
batches, with a progress bar and a summary (facts, entities, failures).

Accepted shapes: a text or markdown file (one document); JSON holding a list of items
(`{"content": …, "timestamp"?, "tags"?, …}`), a list of chat messages (`{"role"|"speaker": …,
"content"|"text": …}`, kept as one transcript), or `{"items": [...]}`; JSONL with one item or one
message per line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ITEM_FIELDS = {"content", "timestamp", "context", "metadata", "document_id", "entities", "tags", "observation_scopes"}
BATCH_SIZE = 20


def _is_message(entry: Any) -> bool:
    return isinstance(entry, dict) and ("role" in entry or "speaker" in entry) and ("content" in entry or "text" in entry)


def _transcript(messages: list[dict[str, Any]], document_id: str) -> dict[str, Any]:
    lines = [f"{m.get('speaker') or m.get('role')}: {m.get('content') or m.get('text')}" for m in messages]
    item: dict[str, Any] = {"content": "\n".join(lines), "document_id": document_id}
    stamps = [m.get("timestamp") for m in messages if m.get("timestamp")]
    if stamps:
        item["timestamp"] = stamps[0]
    return item


def _item(entry: Any, where: str) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"content": entry}
    if not isinstance(entry, dict) or not ("content" in entry or "text" in entry):
        raise ValueError(f"{where}: expected an object with 'content' (or 'text')")
    item = {k: v for k, v in entry.items() if k in ITEM_FIELDS}
    item.setdefault("content", entry.get("text"))
    return item


def read_items(path: Path) -> list[dict[str, Any]]:
    """The retain items a file holds; ValueError naming the line or entry that cannot be read."""
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    if suffix in (".txt", ".md", ".markdown", ""):
        return [{"content": text, "document_id": path.name}]
    if suffix == ".jsonl":
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path.name} line {number}: not JSON ({exc.msg})") from None
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name}: not JSON ({exc.msg} at line {exc.lineno})") from None
        entries = data.get("items", data) if isinstance(data, dict) else data
        if not isinstance(entries, list):
            entries = [entries]
    else:
        raise ValueError(f"{path.name}: unsupported file type (use .json, .jsonl, .txt or .md)")
    if entries and all(_is_message(e) for e in entries):
        return [_transcript(entries, path.name)]
    return [_item(entry, f"{path.name} entry {n}") for n, entry in enumerate(entries, start=1)]


def import_file(
    path: Path,
    bank: str,
    request: Callable[[str, str, Any], Any],
    *,
    tags: list[str] | None,
    batch_size: int = BATCH_SIZE,
) -> dict[str, Any]:
    """Retain the file's items in batches with a progress bar; a failed batch is counted, not fatal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    items = read_items(path)
    before = _counts(request, bank)
    failures: list[str] = []
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn()) as progress:
        task = progress.add_task(f"importing {path.name}", total=len(items))
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            try:
                request("POST", f"/v1/default/banks/{bank}/memories", {"items": batch, "document_tags": tags})
            except SystemExit as exc:
                failures.append(f"items {start + 1}-{start + len(batch)}: {exc}")
            progress.advance(task, len(batch))
    after = _counts(request, bank)
    return {
        "items": len(items),
        "facts": after["facts"] - before["facts"],
        "entities": after["entities"] - before["entities"],
        "failures": failures,
    }


def _counts(request: Callable[[str, str, Any], Any], bank: str) -> dict[str, int]:
    try:
        stats = request("GET", f"/v1/default/banks/{bank}/stats", None)
        entities = request("GET", f"/v1/default/banks/{bank}/entities?limit=1", None)["total"]
    except SystemExit:  # the bank does not exist yet
        return {"facts": 0, "entities": 0}
    return {"facts": stats["total_nodes"], "entities": entities}
