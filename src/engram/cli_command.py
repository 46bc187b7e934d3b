"""What every `engram` subcommand shares: the error a user can act on, the global options, and a
sub-parser that shows its arguments with an example."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], int]


class UserError(Exception):
    """A mistake the user can fix (a missing file, an unknown bank, a server that is not running):
    printed as one line, exit code 1, no traceback."""


def global_options() -> argparse.ArgumentParser:
    """`--url` and `--api-key`, accepted before or after the subcommand.

    The sub-parsers inherit them with `SUPPRESS` defaults, so an option given before the subcommand
    is not reset to None by the sub-parser that did not see it."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, metavar="URL",
                        help="server of the client commands (default $ENGRAM_URL, else http://$ENGRAM_HOST:$ENGRAM_PORT,"
                             " i.e. http://127.0.0.1:8888)")
    common.add_argument("--api-key", default=argparse.SUPPRESS, metavar="KEY",
                        help="API key for a server with ENGRAM_API_KEYS (default $ENGRAM_API_KEY)")
    return common


def add_command(
    sub: Any,
    common: argparse.ArgumentParser,
    name: str,
    handler: Handler,
    *,
    summary: str,
    example: str,
    details: str = "",
) -> argparse.ArgumentParser:
    """A subcommand whose `--help` says what it does, its arguments and an example."""
    epilog = "example:\n  " + example.strip().replace("\n", "\n  ")
    parser = sub.add_parser(
        name, parents=[common], help=summary, description=(summary + (".\n\n" + details if details else ".")),
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(fn=handler)
    return parser
