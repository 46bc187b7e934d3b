"""`engram import BANK FILE`: JSON / JSONL conversations and text / markdown files into a bank, with
progress per item (per turn for a conversation) and a summary (facts, entities, failures).

Accepted shapes: a text or markdown file (one document); JSON holding a list of items
(`{"content": …, "timestamp"?, "tags"?, …}`), a list of chat messages (`{"role"|"speaker": …,
"content"|"text": …}`, kept as one transcript), or `{"items": [...]}`; JSONL with one item or one
message per line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engram.cli_command import UserError, add_command

ITEM_FIELDS = {"content", "timestamp", "context", "metadata", "document_id", "entities", "tags", "observation_scopes"}
MAX_BATCH = 20  # items per request at most
TARGET_SECONDS = 1.0  # batches grow or shrink so that progress moves about once a second
TURN_GROUP_CHARS = 3000  # a conversation goes in groups of turns of about one extraction chunk
PLAIN_EVERY_SECONDS = 5.0  # how often a non-terminal gets a progress line


def _is_message(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    return ("role" in entry or "speaker" in entry) and ("content" in entry or "text" in entry)


def _transcript(messages: list[dict[str, Any]], document_id: str) -> dict[str, Any]:
    """The conversation as one item; `turns` (not sent) lets the import report progress per turn."""
    lines = [f"{m.get('speaker') or m.get('role')}: {m.get('content') or m.get('text')}" for m in messages]
    item: dict[str, Any] = {"content": "\n".join(lines), "document_id": document_id, "turns": lines}
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




class Reporter:
    """Progress on stderr: one line rewritten in place on a terminal, a plain line every few seconds
    otherwise (logs, CI)."""

    def __init__(self, label: str, total: int, unit: str) -> None:
        self.label, self.total, self.unit, self.done = label, total, unit, 0
        self.started = self.last_line = time.monotonic()
        self.live = sys.stderr.isatty()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / max(elapsed, 1e-6)
        left = f", {(self.total - self.done) / rate:.0f} s left" if 0 < self.done < self.total else ""
        return (f"{self.label}: {self.done:,}/{self.total:,} {self.unit} "
                f"({100 * self.done // max(self.total, 1)} %, {rate:.1f}/s{left})")

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.live:
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)
        elif now - self.last_line >= PLAIN_EVERY_SECONDS or self.done == self.total:
            self.last_line = now
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.live and self.done:
            print(file=sys.stderr)


def _parts(items: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], int, bool]]:
    """(item, units it advances, whether it is part of a conversation). A conversation goes as groups
    of turns appended to its document (the first group replaces it, so importing the file again does
    not double it); other items go one by one, for the caller to batch."""
    for item in items:
        turns = item.pop("turns", None)
        if not turns:
            yield item, 1, False
            continue
        group: list[str] = []
        first = True
        for turn in [*turns, None]:
            if turn is not None and (not group or sum(map(len, group)) + len(turn) < TURN_GROUP_CHARS):
                group.append(turn)
                continue
            mode = "replace" if first else "append"
            yield {**item, "content": "\n".join(group), "update_mode": mode}, len(group), True
            first, group = False, [] if turn is None else [turn]


class _Sender:
    """Posts items, counting failures; single items are batched, the batch sized so that a request
    takes about TARGET_SECONDS (progress moves about once a second, with few requests)."""

    def __init__(self, request: Callable[[str, str, Any], Any], bank: str, tags: list[str] | None,
                 reporter: Reporter) -> None:
        self.request, self.bank, self.tags, self.reporter = request, bank, tags, reporter
        self.failures: list[str] = []
        self.batch: list[dict[str, Any]] = []
        self.batch_size = 1
        self.position = 0

    def add(self, item: dict[str, Any]) -> None:
        self.batch.append(item)
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        started = time.monotonic()
        self.send(self.batch, len(self.batch), "items")
        per_item = (time.monotonic() - started) / len(self.batch)
        self.batch_size = max(1, min(MAX_BATCH, int(TARGET_SECONDS / max(per_item, 1e-3))))
        self.batch = []

    def send(self, items: list[dict[str, Any]], units: int, unit: str) -> None:
        from engram.cli_http import bank_path

        try:
            self.request("POST", bank_path(self.bank, "/memories"), {"items": items, "document_tags": self.tags})
        except UserError as exc:
            self.failures.append(f"{unit} {self.position + 1}-{self.position + units}: {exc}")
        self.position += units
        self.reporter.advance(units)


def import_file(
    path: Path,
    bank: str,
    request: Callable[[str, str, Any], Any],
    *,
    tags: list[str] | None,
) -> dict[str, Any]:
    """Retain the file's items with progress; a failed request is counted, not fatal."""
    items = read_items(path)
    conversation = any(item.get("turns") for item in items)
    total = sum(len(item.get("turns") or [None]) for item in items)
    before = _counts(request, bank)
    reporter = Reporter(f"importing {path.name}", total, "turns" if conversation else "items")
    sender = _Sender(request, bank, tags, reporter)
    try:
        for item, units, is_turns in _parts(items):
            if is_turns:
                sender.flush()
                sender.send([item], units, "turns")
            else:
                sender.add(item)
        sender.flush()
    finally:
        reporter.close()
    after = _counts(request, bank)
    return {
        "items": len(items),
        "facts": after["facts"] - before["facts"],
        "entities": after["entities"] - before["entities"],
        "failures": sender.failures,
    }


def _counts(request: Callable[[str, str, Any], Any], bank: str) -> dict[str, int]:
    from engram.cli_http import bank_path

    try:
        stats = request("GET", bank_path(bank, "/stats"), None)
        entities = request("GET", bank_path(bank, "/entities?limit=1"), None)["total"]
    except UserError:  # the bank does not exist yet
        return {"facts": 0, "entities": 0}
    return {"facts": stats["total_nodes"], "entities": entities}


def cmd_import(args: argparse.Namespace) -> int:
    from engram.cli_files import retain_file, wants_conversion
    from engram.cli_http import Client

    if wants_conversion(args.file):  # PDF, DOCX, …: converted by the server
        return retain_file(args, args.file)
    client = Client(args)
    try:
        summary = import_file(Path(args.file), args.bank, lambda m, p, b: client.request(m, p, b), tags=args.tag)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"cannot import {args.file}: {getattr(exc, 'strerror', None) or exc}") from None
    print(f"imported {summary['items']:,} items into {args.bank}: {summary['facts']:,} new facts, "
          f"{summary['entities']:,} new entities, {len(summary['failures'])} failed batches")
    for failure in summary["failures"]:
        print(f"  failed: {failure}")
    return 1 if summary["failures"] else 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    importer = add_command(
        sub, common, "import", cmd_import, summary="import conversations or documents from a file, with progress",
        details="FILE is .json or .jsonl (retain items, or chat messages with role/speaker and content/text, kept "
                "as one conversation) or .txt / .md (one document). Progress goes to stderr, per item or per turn.",
        example="engram import my-bank chat.json --tag chat",
    )
    importer.add_argument("bank", metavar="BANK", help="the bank id (created if new)")
    importer.add_argument("file", metavar="FILE", help="the file to import")
    importer.add_argument("--tag", action="append", metavar="TAG", help="tag every imported memory (repeatable)")
