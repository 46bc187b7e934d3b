"""`engram` command line: run the server or a worker, and talk to a running server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def _client_url(args: argparse.Namespace) -> str:
    return args.url or os.environ.get("ENGRAM_URL") or "http://127.0.0.1:8888"


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from engram.api.app import create_app
    from engram.settings import Settings

    logging.basicConfig(level=os.environ.get("ENGRAM_LOG_LEVEL", "INFO"), format="%(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    app = create_app(settings)
    uvicorn.run(app, host=args.host or settings.host, port=args.port or settings.port, log_level="warning")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from engram.api.app import close_services, open_services
    from engram.settings import Settings
    from engram.worker.runner import Worker

    logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")

    async def run() -> None:
        svc = await open_services(Settings.from_env())
        worker = Worker(svc, concurrency=args.concurrency)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await worker.start()
        print(f"engram worker {worker.worker_id} running; Ctrl-C to stop", file=sys.stderr)
        await stop.wait()
        await worker.stop()
        await close_services(svc)

    asyncio.run(run())
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    import logging

    from engram.mcp.stdio import run_stdio

    # stdout carries the protocol: logs go to stderr.
    level = os.environ.get("ENGRAM_LOG_LEVEL", "WARNING")
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    run_stdio(bank_id=args.bank)
    return 0


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    import httpx

    headers = {}
    key = os.environ.get("ENGRAM_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        response = httpx.request(method, _client_url(args) + path, json=body, headers=headers, timeout=600)
    except httpx.HTTPError as exc:
        raise SystemExit(f"cannot reach the Engram server at {_client_url(args)}: {exc}") from exc
    if response.status_code >= 400:
        raise SystemExit(f"error {response.status_code}: {response.text}")
    return response.json()


def cmd_retain(args: argparse.Namespace) -> int:
    from engram.cli_files import retain_file, wants_conversion

    if wants_conversion(args.file):  # PDF, DOCX, …: converted by the server
        return retain_file(args, args.file)
    if args.file:
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
    elif args.text:
        text = args.text
    else:
        raise SystemExit("give the text to retain, or --file PATH")
    item: dict[str, Any] = {"content": text}
    if args.tag:
        item["tags"] = args.tag
    if args.document_id:
        item["document_id"] = args.document_id
    result = _request(args, "POST", f"/v1/default/banks/{args.bank}/memories", {"items": [item]})
    print(json.dumps(result, indent=2))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    body = {"query": args.query, "budget": args.budget, "max_tokens": args.max_tokens}
    result = _request(args, "POST", f"/v1/default/banks/{args.bank}/memories/recall", body)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for rank, memory in enumerate(result["results"], start=1):
        print(f"{rank:3d}. [{memory.get('type')}] {memory['text']}")
    return 0


def cmd_banks(args: argparse.Namespace) -> int:
    result = _request(args, "GET", "/v1/default/banks")
    for bank in result["banks"]:
        print(f"{bank['bank_id']}\t{bank.get('fact_count', 0)} memories")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from engram.cli_files import retain_file, wants_conversion
    from engram.cli_import import import_file

    if wants_conversion(args.file):
        return retain_file(args, args.file)
    try:
        summary = import_file(Path(args.file), args.bank, lambda m, p, b: _request(args, m, p, b), tags=args.tag)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot import {args.file}: {exc}") from exc
    print(f"imported {summary['items']} items into {args.bank}: {summary['facts']} new facts, "
          f"{summary['entities']} new entities, {len(summary['failures'])} failed batches")
    for failure in summary["failures"]:
        print(f"  failed: {failure}")
    return 1 if summary["failures"] else 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    stats = _request(args, "GET", f"/v1/default/banks/{args.bank}/stats")
    table = Table(title=f"bank {args.bank}", show_header=False)
    rows = [("memories", stats["total_nodes"]), ("documents", stats["total_documents"]),
            ("links", stats["total_links"]), ("observations", stats["total_observations"]),
            ("waiting for consolidation", stats["pending_consolidation"]),
            ("failed consolidation", stats["failed_consolidation"]),
            ("pending operations", stats["pending_operations"]), ("failed operations", stats["failed_operations"])]
    rows += [(f"  {kind}", count) for kind, count in stats["nodes_by_fact_type"].items()]
    for name, value in rows:
        table.add_row(name, str(value))
    Console().print(table)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    manifest = _request(args, "GET", f"/v1/default/banks/{args.bank}/export")
    text = json.dumps(manifest, indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    else:
        print(text)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    with open(args.file, encoding="utf-8") as handle:
        manifest = json.load(handle)
    suffix = "?dry_run=true" if args.dry_run else ""
    print(json.dumps(_request(args, "POST", f"/v1/default/banks/{args.bank}/import{suffix}", manifest), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory server for AI agents")
    parser.add_argument("--url", help="server URL for client commands (default $ENGRAM_URL or http://127.0.0.1:8888)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP server (embedded PostgreSQL unless ENGRAM_DATABASE_URL)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(fn=cmd_serve)

    worker = sub.add_parser("worker", help="run a background worker against the same database")
    worker.add_argument("--concurrency", type=int, default=2)
    worker.set_defaults(fn=cmd_worker)

    retain = sub.add_parser("retain", help="store text in a bank")
    retain.add_argument("bank")
    retain.add_argument("text", nargs="?")
    retain.add_argument("--file")
    retain.add_argument("--tag", action="append")
    retain.add_argument("--document-id")
    retain.set_defaults(fn=cmd_retain)

    recall = sub.add_parser("recall", help="find memories relevant to a query")
    recall.add_argument("bank")
    recall.add_argument("query")
    recall.add_argument("--budget", choices=["low", "mid", "high"], default="mid")
    recall.add_argument("--max-tokens", type=int, default=4096)
    recall.add_argument("--json", action="store_true")
    recall.set_defaults(fn=cmd_recall)

    mcp = sub.add_parser("mcp", help="serve MCP over stdio for desktop agents (Claude Desktop, Cursor, ...)")
    mcp.add_argument("--bank", help="serve this bank only: its tools take no bank_id")
    mcp.set_defaults(fn=cmd_mcp)

    banks = sub.add_parser("banks", help="list banks")
    banks.set_defaults(fn=cmd_banks)

    importer = sub.add_parser("import", help="import JSON/JSONL conversations or text/markdown files, with progress")
    importer.add_argument("bank")
    importer.add_argument("file")
    importer.add_argument("--tag", action="append", help="tag every imported memory (repeatable)")
    importer.set_defaults(fn=cmd_import)

    stats = sub.add_parser("stats", help="a bank's counts")
    stats.add_argument("bank")
    stats.set_defaults(fn=cmd_stats)

    export = sub.add_parser("export", help="a bank's template: config, mental models, directives")
    export.add_argument("bank")
    export.add_argument("-o", "--output")
    export.set_defaults(fn=cmd_export)

    restore = sub.add_parser("restore", help="apply a bank template (from engram export)")
    restore.add_argument("bank")
    restore.add_argument("file")
    restore.add_argument("--dry-run", action="store_true")
    restore.set_defaults(fn=cmd_restore)

    from engram.cli_transfer import add_commands as add_transfer_commands

    add_transfer_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
