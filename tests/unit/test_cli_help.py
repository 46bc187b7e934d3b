"""Every `engram` subcommand's `--help` describes its arguments and shows an example."""

from __future__ import annotations

import argparse

from engram.cli import build_parser

Leaf = tuple[tuple[str, ...], argparse.ArgumentParser]


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Leaf]:
    found: list[Leaf] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _leaves(child, (*path, name))
    return found or [(path, parser)]


def test_every_command_has_an_example_and_described_arguments() -> None:
    leaves = _leaves(build_parser())
    names = {" ".join(path) for path, _ in leaves}
    assert {"serve", "retain", "recall", "reflect", "documents list", "documents delete", "bank delete",
            "operations list", "operations retry", "consolidate", "import"} <= names
    for path, parser in leaves:
        text = parser.format_help()
        example = text.partition("example:\n")[2]
        assert f"engram {' '.join(path)}" in example, f"engram {' '.join(path)} --help shows no example"
        for action in parser._actions:
            if action.dest != "help" and action.help is not argparse.SUPPRESS:
                assert action.help, f"engram {' '.join(path)}: {action.dest} is not described"
        assert "--url" in text and "--api-key" in text, "the global options are accepted after the command too"
