"""`engram` command line: run the server or a worker, and talk to a running server.

The commands live in cli_server (serve, worker, mcp), cli_client (retain, recall, banks, ...) and
cli_import; this module builds the parser from them and turns user errors into one line."""

from __future__ import annotations

import argparse
import sys

from engram import __version__
from engram.cli_command import UserError, global_options

EXAMPLES = """examples:
  engram serve                                  # http://127.0.0.1:8888, control plane at /ui/
  engram retain my-bank "Alice joined Acme as a designer last March."
  engram recall my-bank "Where does Alice work?"
  engram --url http://10.0.0.5:8888 banks

`engram COMMAND --help` describes a command's arguments."""


def build_parser() -> argparse.ArgumentParser:
    from engram import cli_client, cli_import, cli_reembed, cli_server, cli_transfer

    common = global_options()
    parser = argparse.ArgumentParser(
        prog="engram", parents=[common], description="Engram: long-term memory server for AI agents.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"engram {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli_server.add_commands(sub, common)
    cli_client.add_commands(sub, common)
    cli_import.add_commands(sub, common)
    cli_transfer.add_commands(sub, common)
    cli_reembed.add_commands(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except UserError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("engram: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
