"""`engram import-hindsight ARCHIVE [--bank ID]`: a transfer archive (exported by Hindsight 1.1.0 or by
Engram) into a bank of a running server, with a progress bar fed by the import operation, and a
summary of what arrived."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.25


def _headers() -> dict[str, str]:
    key = os.environ.get("ENGRAM_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _source_bank(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            return str(json.loads(zf.read("manifest.json"))["source_bank_id"])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise SystemExit(f"{path} is not a transfer archive (no manifest.json with a source_bank_id): {exc}") from exc


def _submit(url: str, path: Path, bank: str, args: argparse.Namespace) -> str:
    import httpx

    params = {"target_bank_id": bank, "mode": "merge" if args.merge else "restore",
              "document_conflict": args.document_conflict}
    try:
        with path.open("rb") as handle:
            answer = httpx.post(f"{url}/v1/default/banks/{bank}/transfer/import", params=params,
                                files={"file": (path.name, handle, "application/zip")}, headers=_headers(),
                                timeout=600)
    except httpx.HTTPError as exc:
        raise SystemExit(f"cannot reach the Engram server at {url}: {exc}") from exc
    if answer.status_code >= 400:
        raise SystemExit(f"error {answer.status_code}: {answer.text}")
    return answer.json()["operation_id"]


def _follow(url: str, bank: str, operation_id: str) -> dict[str, Any]:
    """Poll the operation, drawing its stage and progress, until it ends."""
    import httpx
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    # The bar goes to stderr: stdout carries the result, which scripts may read.
    columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("queued", total=None)
        while True:
            status = httpx.get(f"{url}/v1/default/banks/{bank}/operations/{operation_id}", headers=_headers(),
                               timeout=60).json()
            progress = status.get("progress") or {}
            if progress:
                bar.update(task, description=progress.get("stage", ""), completed=progress.get("processed", 0),
                           total=progress.get("total") or None)
            if status["status"] in ("completed", "failed", "cancelled"):
                if status["status"] == "completed":
                    bar.update(task, description="done", completed=1, total=1)
                return status
            time.sleep(POLL_SECONDS)


def cmd_import_hindsight(args: argparse.Namespace) -> int:
    from engram.cli import _client_url

    path = Path(args.archive)
    bank = args.bank or _source_bank(path)
    url = _client_url(args)
    status = _follow(url, bank, _submit(url, path, bank, args))
    if status["status"] != "completed":
        print(f"import {status['status']}: {status.get('error_message')}", file=sys.stderr)
        return 1
    result = status["result_metadata"] or {}
    print(f"imported {path.name} into bank '{bank}':")
    for key in ("documents_imported", "documents_skipped", "facts_imported", "chunks_imported",
                "observations_imported", "mental_models_imported", "directives_imported", "attachments_imported"):
        print(f"  {key.replace('_', ' ')}: {result.get(key, 0)}")
    if result.get("config_keys_dropped"):
        print(f"  config keys Engram does not know, left out: {', '.join(result['config_keys_dropped'])}")
    return 0


def add_commands(sub: Any) -> None:
    command = sub.add_parser("import-hindsight", help="import a Hindsight (or Engram) bank transfer archive")
    command.add_argument("archive", help="the ZIP from POST …/transfer/export")
    command.add_argument("--bank", help="the bank to create (default: the archive's source bank id)")
    command.add_argument("--merge", action="store_true", help="add to an existing bank instead of creating one")
    command.add_argument("--document-conflict", choices=["skip", "replace", "new-id"], default="skip",
                         help="with --merge: what to do with a document id the bank already has")
    command.set_defaults(fn=cmd_import_hindsight)
