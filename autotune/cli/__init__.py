"""`autotune` command line: search, show, lab, export, apply, check, profile. Thin: parse, check input, call the
library. One module per subcommand (files.py holds the three that read a search's files)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from autotune import __version__
from autotune.cli import check, files, lab, profile, search
from autotune.cli.common import Parser
from autotune.contract.errors import InputError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="autotune",
        description="Find, by measurement, the fastest training configuration for your PyTorch "
        "training step on this machine.",
    )
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    search.add_parser(sub)
    files.add_show(sub)
    lab.add_parser(sub)
    files.add_export(sub)
    files.add_apply(sub)
    check.add_parser(sub)
    profile.add_parser(sub)
    for command in sub.choices.values():  # an unknown flag is its subcommand's usage error
        command.set_defaults(usage_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.error("give a command: search, show, lab, export, apply, check or profile")
    if unknown:  # with the subcommand's exit status (`autotune check`: 2, not a regression)
        args.usage_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 1
