"""`engram retain BANK --file report.pdf` and `engram import BANK report.docx`: a file Engram converts
(PDF, DOCX, PPTX, XLSX, HTML, CSV) is uploaded to POST …/files/retain and its operation followed
with a progress bar; text and markdown files keep the plain retain / import path."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CONVERTED = {".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm", ".csv"}


def wants_conversion(path: str | None) -> bool:
    return bool(path) and Path(path).suffix.lower() in CONVERTED


def retain_file(args: argparse.Namespace, path: str) -> int:
    from engram.cli_http import bank_path, server_url
    from engram.cli_transfer import follow, upload

    url, file = server_url(args), Path(path)
    bank_path(args.bank)
    meta = {k: v for k, v in {"tags": getattr(args, "tag", None),
                              "document_id": getattr(args, "document_id", None)}.items() if v}
    answer = upload(args, f"{url}/v1/default/banks/{args.bank}/files/retain", file, "files",
                    data={"request": json.dumps({"files_metadata": [meta]})})
    (operation_id,) = answer["operation_ids"]
    status = follow(args, url, args.bank, operation_id, file.name)
    if status["status"] != "completed":
        print(f"{file.name}: {status['status']}: {status.get('error_message')}", file=sys.stderr)
        return 1
    print(json.dumps(status["result_metadata"], indent=2))
    return 0
