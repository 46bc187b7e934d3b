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

from engram.cli_command import UserError, add_command

POLL_SECONDS = 0.25


def _headers(args: argparse.Namespace) -> dict[str, str]:
    key = getattr(args, "api_key", None) or os.environ.get("ENGRAM_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _source_bank(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            return str(json.loads(zf.read("manifest.json"))["source_bank_id"])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UserError(f"{path} is not a transfer archive (no manifest.json with a source_bank_id): {exc}") from exc


def upload(args: argparse.Namespace, url: str, path: Path, field: str, media_type: str | None = None,
           **request: Any) -> Any:
    """POST one file as multipart `field` (plus `request`'s params / data) and answer the decoded JSON;
    an unreadable file, an unreachable server or a refusal is a UserError saying what to do."""
    import httpx

    try:
        with path.open("rb") as handle:
            part = (path.name, handle, media_type) if media_type else (path.name, handle)
            answer = httpx.post(url, files={field: part}, headers=_headers(args), timeout=600, **request)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except httpx.HTTPError as exc:
        raise UserError(f"cannot reach the Engram server at {url} ({exc}): start it with `engram serve`") from None
    if answer.status_code >= 400:
        raise UserError(f"{answer.text[:300]} (HTTP {answer.status_code})")
    return answer.json()


def _submit(url: str, path: Path, bank: str, args: argparse.Namespace) -> str:
    params = {"target_bank_id": bank, "mode": "merge" if args.merge else "restore",
              "document_conflict": args.document_conflict}
    answer = upload(args, f"{url}/v1/default/banks/{bank}/transfer/import", path, "file", "application/zip",
                    params=params)
    return str(answer["operation_id"])


def follow(args: argparse.Namespace, url: str, bank: str, operation_id: str, label: str) -> dict[str, Any]:
    """Poll the operation until it ends, its progress on stderr (stdout carries the result, which
    scripts may read)."""
    import httpx

    from engram.cli_import import Reporter

    reporter: Reporter | None = None
    while True:
        status = httpx.get(f"{url}/v1/default/banks/{bank}/operations/{operation_id}", headers=_headers(args),
                           timeout=60).json()
        progress = status.get("progress") or {}
        if progress.get("total"):
            if reporter is None:
                reporter = Reporter(f"{label} ({progress.get('stage', '')})", int(progress["total"]), "records")
            reporter.advance(int(progress.get("processed", 0)) - reporter.done)
        if status["status"] in ("completed", "failed", "cancelled"):
            if reporter is not None:
                reporter.close()
            print(f"{label}: {status['status']}", file=sys.stderr, flush=True)
            return status
        time.sleep(POLL_SECONDS)


def cmd_import_hindsight(args: argparse.Namespace) -> int:
    from engram.cli_http import bank_path, server_url

    path = Path(args.archive)
    bank = args.bank or _source_bank(path)
    bank_path(bank)  # a usable bank id, or a UserError saying why not
    url = server_url(args)
    status = follow(args, url, bank, _submit(url, path, bank, args), path.name)
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


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    command = add_command(
        sub, common, "import-hindsight", cmd_import_hindsight,
        summary="import a Hindsight (or Engram) bank transfer archive, with progress",
        details="ARCHIVE is the ZIP of POST …/transfer/export, from Hindsight 1.1.0 or Engram. Facts are "
                "re-embedded with Engram's model.",
        example="engram import-hindsight hindsight-export.zip --bank my-bank",
    )
    command.add_argument("archive", metavar="ARCHIVE", help="the ZIP from POST …/transfer/export")
    command.add_argument("--bank", metavar="ID", help="the bank to create (default: the archive's source bank id)")
    command.add_argument("--merge", action="store_true", help="add to an existing bank instead of creating one")
    command.add_argument("--document-conflict", choices=["skip", "replace", "new-id"], default="skip",
                         help="with --merge: what to do with a document id the bank already has")
