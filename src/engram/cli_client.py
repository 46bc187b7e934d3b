"""The client commands of `engram`: talk to a running server over its HTTP API."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from engram.cli_command import UserError, add_command
from engram.cli_http import Client, bank_path


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _read_text(args: argparse.Namespace) -> str:
    if args.file and args.text is not None:
        raise UserError("give the text either as an argument or with --file, not both")
    if args.file:
        try:
            with open(args.file, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise UserError(f"cannot read {args.file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UserError(f"cannot read {args.file}: not UTF-8 text") from None
    if args.text is not None:
        return args.text
    raise UserError("give the text to retain, or --file PATH (see `engram retain --help`)")


def cmd_retain(args: argparse.Namespace) -> int:
    from engram.cli_files import retain_file, wants_conversion

    if wants_conversion(args.file):  # PDF, DOCX, …: converted by the server
        if args.text is not None:
            raise UserError("give the text either as an argument or with --file, not both")
        return retain_file(args, args.file)
    text = _read_text(args)
    if not text.strip():
        raise UserError("nothing to retain: the text is empty")
    client = Client(args)
    document_id = args.document_id or str(uuid.uuid4())  # what the server would pick, known here to report on
    item: dict[str, Any] = {"content": text, "document_id": document_id}
    if args.tag:
        item["tags"] = args.tag
    body = {"items": [item], "async": bool(args.run_async)}
    result = client.request("POST", bank_path(args.bank, "/memories"), body)
    if args.json:
        _print_json(result)
        return 0
    if args.run_async:
        print(f"queued in {args.bank} as operation {result['operation_id']} (document {document_id}); "
              f"`engram operations list {args.bank}` shows its progress")
        return 0
    listed = client.request("GET", bank_path(args.bank, "/memories/list"),
                            params={"document_id": document_id, "limit": 1000})
    entities = sorted({name.strip() for row in listed["items"] for name in (row.get("entities") or "").split(",")
                       if name.strip()})
    shown = ", ".join(entities[:8]) + (", …" if len(entities) > 8 else "")
    count = listed["total"]
    print(f"stored {count:,} fact{'' if count == 1 else 's'} in {args.bank}, document {document_id}")
    print(f"entities ({len(entities):,}): {shown or 'none'}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    body = {"query": args.query, "budget": args.budget, "max_tokens": args.max_tokens}
    result = Client(args).request("POST", bank_path(args.bank, "/memories/recall"), body)
    if args.json:
        _print_json(result)
        return 0
    if not result["results"]:
        print(f"no memories in {args.bank} match", file=sys.stderr)
    for rank, memory in enumerate(result["results"], start=1):
        print(f"{rank:3d}. [{memory.get('type')}] {memory['text']}")
    return 0


def cmd_reflect(args: argparse.Namespace) -> int:
    body = {"query": args.query, "budget": args.budget}
    result = Client(args).request("POST", bank_path(args.bank, "/reflect"), body)
    if args.json:
        _print_json(result)
    else:
        print(result.get("text", ""))
    return 0


def cmd_banks(args: argparse.Namespace) -> int:
    result = Client(args).request("GET", "/v1/default/banks")
    if not result["banks"]:
        print("no banks yet: `engram retain BANK TEXT` creates one", file=sys.stderr)
    for bank in result["banks"]:
        print(f"{bank['bank_id']}\t{bank.get('fact_count', 0):,} memories")
    return 0


def _confirmed(args: argparse.Namespace, what: str) -> None:
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UserError(f"{what} cannot be undone: add --yes to confirm")
    if input(f"{what} cannot be undone. Type yes to go on: ").strip().lower() != "yes":
        raise UserError("cancelled")


def cmd_bank_delete(args: argparse.Namespace) -> int:
    from engram.cli_removal import delete_bank_with_progress

    _confirmed(args, f"deleting bank {args.bank} and all its memories")
    delete_bank_with_progress(Client(args), args.bank)
    print(f"deleted bank {args.bank}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    stats = Client(args).request("GET", bank_path(args.bank, "/stats"))
    consolidation = stats.get("consolidation") or {}
    off = consolidation.get("enabled") is False
    rows = [("memories", stats["total_nodes"]), ("documents", stats["total_documents"]),
            ("links", stats["total_links"]), ("observations", stats["total_observations"]),
            ("not consolidated" if off else "waiting for consolidation", stats["pending_consolidation"]),
            ("failed consolidation", stats["failed_consolidation"]),
            ("pending operations", stats["pending_operations"]), ("failed operations", stats["failed_operations"])]
    rows += [(f"  {kind}", count) for kind, count in stats["nodes_by_fact_type"].items()]
    width = max(len(name) for name, _ in rows)
    print(f"bank {args.bank}")
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>9,}")
    if off:
        print(f"consolidation is off: {consolidation.get('reason')} (set {consolidation.get('setting')})")
    return 0


def _listing(args: argparse.Namespace, path: str, **params: Any) -> dict[str, Any] | None:
    """A page of a list route; None once printed as JSON (--json)."""
    given = {name: value for name, value in params.items() if value is not None}
    result = Client(args).request("GET", bank_path(args.bank, path), params=given)
    if args.json:
        _print_json(result)
        return None
    return result


def cmd_documents_list(args: argparse.Namespace) -> int:
    result = _listing(args, "/documents", limit=args.limit, offset=args.offset, q=args.q)
    if result is None:
        return 0
    for doc in result["items"]:
        print(f"{doc['id']}\t{doc['memory_unit_count']:,} facts\t{doc['text_length']:,} chars\t{doc['updated_at']}")
    shown = len(result["items"])
    print(f"{args.offset + 1 if shown else 0:,}–{args.offset + shown:,} of {result['total']:,} documents",
          file=sys.stderr)
    return 0


def cmd_documents_delete(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    result = Client(args).request("DELETE", bank_path(args.bank, f"/documents/{quote(args.document_id, safe='')}"))
    print(f"deleted document {args.document_id} ({result.get('memory_units_deleted', 0):,} facts)")
    return 0


def cmd_operations_list(args: argparse.Namespace) -> int:
    result = _listing(args, "/operations", limit=args.limit, status=args.status)
    if result is None:
        return 0
    for op in result["operations"]:
        error = f"\t{op['error_message']}" if op.get("error_message") else ""
        print(f"{op['id']}\t{op['operation_type']}\t{op['status']}\t{op['created_at']}{error}")
    print(f"{len(result['operations']):,} of {result['total']:,} operations", file=sys.stderr)
    return 0


def cmd_operations_retry(args: argparse.Namespace) -> int:
    Client(args).request("POST", bank_path(args.bank, f"/operations/{args.operation_id}/retry"))
    print(f"operation {args.operation_id} queued again")
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    result = Client(args).request("POST", bank_path(args.bank, "/consolidate"), {})
    again = " (one was already queued)" if result.get("deduplicated") else ""
    print(f"consolidation queued as operation {result['operation_id']}{again}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    manifest = Client(args).request("GET", bank_path(args.bank, "/export"))
    text = json.dumps(manifest, indent=2)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        print(text)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except OSError as exc:
        raise UserError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"{args.file} is not a bank template (not JSON: {exc})") from None
    params = {"dry_run": "true"} if args.dry_run else None
    _print_json(Client(args).request("POST", bank_path(args.bank, "/import"), manifest, params=params))
    return 0


def _bank(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bank", metavar="BANK", help="the bank id (created on first retain)")


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the server's JSON answer instead")


def _memory_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    retain = add_command(sub, common, "retain", cmd_retain, summary="store text in a bank",
                         details="Prints how many facts were stored, their entities and the document id.",
                         example='engram retain my-bank "Alice joined Acme as a designer last March."\n'
                                 "engram retain my-bank --file notes.md --tag house --document-id notes")
    _bank(retain)
    retain.add_argument("text", nargs="?", metavar="TEXT", help="the text (or use --file)")
    retain.add_argument("--file", metavar="PATH", help="retain this file instead of TEXT: UTF-8 text, or a PDF, "
                        "DOCX, PPTX, XLSX, HTML or CSV file the server converts")
    retain.add_argument("--tag", action="append", metavar="TAG", help="tag the memories (repeatable)")
    retain.add_argument("--document-id", metavar="ID", help="group the facts under this document; retaining the "
                        "same id again replaces it (default: a new id)")
    retain.add_argument("--async", dest="run_async", action="store_true",
                        help="queue the work and return its operation id at once")
    _json_flag(retain)

    recall = add_command(sub, common, "recall", cmd_recall, summary="print the memories that best answer a query",
                         example='engram recall my-bank "Where does Alice work?" --budget high')
    _bank(recall)
    recall.add_argument("query", metavar="QUERY", help="a question or keywords")
    recall.add_argument("--budget", choices=["low", "mid", "high"], default="mid",
                        help="candidates per retrieval arm: 100 / 300 / 1000 (default mid)")
    recall.add_argument("--max-tokens", type=int, default=4096, help="token budget of the results (default 4096)")
    _json_flag(recall)

    reflect = add_command(sub, common, "reflect", cmd_reflect, summary="answer a question from memory with the LLM",
                          details="Needs an LLM on the server (ENGRAM_LLM_PROVIDER).",
                          example='engram reflect my-bank "What should I know about Alice before our meeting?"')
    _bank(reflect)
    reflect.add_argument("query", metavar="QUESTION", help="the question")
    reflect.add_argument("--budget", choices=["low", "mid", "high"], default="low",
                         help="how many tool calls it may make (default low)")
    _json_flag(reflect)

    consolidate = add_command(sub, common, "consolidate", cmd_consolidate,
                              summary="queue a consolidation of the bank's facts into observations",
                              details="Needs an LLM on the server (ENGRAM_LLM_PROVIDER).",
                              example="engram consolidate my-bank")
    _bank(consolidate)


def _bank_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    banks = add_command(sub, common, "banks", cmd_banks, summary="list the banks with their memory counts",
                        example="engram banks")
    del banks
    bank = sub.add_parser("bank", help="manage one bank (delete)", description="Manage one bank.")
    bank_sub = bank.add_subparsers(dest="action", required=True, metavar="ACTION")
    delete = add_command(bank_sub, common, "delete", cmd_bank_delete,
                         summary="delete a bank and everything in it, with progress",
                         example="engram bank delete old-bank --yes")
    _bank(delete)
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    stats = add_command(sub, common, "stats", cmd_stats, summary="a bank's counts", example="engram stats my-bank")
    _bank(stats)

    export = add_command(sub, common, "export", cmd_export,
                         summary="write a bank's template: config overrides, mental models, directives",
                         example="engram export my-bank -o my-bank.json")
    _bank(export)
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of printing")

    restore = add_command(sub, common, "restore", cmd_restore, summary="apply a bank template (from engram export)",
                          example="engram restore new-bank my-bank.json --dry-run")
    _bank(restore)
    restore.add_argument("file", metavar="FILE", help="the template's JSON file")
    restore.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")


def _document_and_operation_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    documents = sub.add_parser("documents", help="list or delete a bank's documents",
                               description="List or delete a bank's documents.")
    doc_sub = documents.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = add_command(doc_sub, common, "list", cmd_documents_list, summary="list a bank's documents",
                         example="engram documents list my-bank --limit 20")
    _bank(listed)
    listed.add_argument("--q", metavar="TEXT", help="only documents whose id contains TEXT")
    listed.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    listed.add_argument("--offset", type=int, default=0, help="skip this many first (default 0)")
    _json_flag(listed)
    delete = add_command(doc_sub, common, "delete", cmd_documents_delete,
                         summary="delete a document and the facts it holds",
                         example="engram documents delete my-bank notes")
    _bank(delete)
    delete.add_argument("document_id", metavar="DOCUMENT_ID", help="the document's id (see documents list)")

    operations = sub.add_parser("operations", help="list or retry a bank's background operations",
                                description="List or retry a bank's background operations.")
    op_sub = operations.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = add_command(op_sub, common, "list", cmd_operations_list,
                         summary="list a bank's operations, newest first",
                         example="engram operations list my-bank --status failed")
    _bank(listed)
    listed.add_argument("--status", choices=["pending", "processing", "completed", "failed", "cancelled"],
                        help="only operations in this state")
    listed.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    _json_flag(listed)
    retry = add_command(op_sub, common, "retry", cmd_operations_retry,
                        summary="queue a failed or cancelled operation again",
                        example="engram operations retry my-bank 5b0c…")
    _bank(retry)
    retry.add_argument("operation_id", metavar="OPERATION_ID", help="the operation's id (see operations list)")


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    _memory_commands(sub, common)
    _bank_commands(sub, common)
    _document_and_operation_commands(sub, common)
