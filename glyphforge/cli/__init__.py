"""The ``prepare-data`` and ``glyphforge`` commands: one module per command group.

Each command calls a library function, so what a command does, a Python user can do too.
`common` holds what the commands share (parsers, the data context, running a command: one
readable paragraph per error, exit status 1, or 2 for bad arguments; ``-v`` adds the
traceback), `args` the argument types and `errors` the target lookups.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from glyphforge.cli import build, cache, export, info, prepare, preview, publish, view, warmup
from glyphforge.cli.common import new_parser, run

__all__ = ["main", "prepare_data_main"]


def prepare_data_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prepare-data``."""
    args = prepare.prepare_parser().parse_args(argv)
    return run(prepare.prepare_data, args)


def _glyphforge_parser() -> argparse.ArgumentParser:
    parser = new_parser("glyphforge", "Inspect the cache, preview data and build derived datasets.",
                        "glyphforge build scenes --glyphs font --n-examples 2000")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (info, cache, preview, view, warmup, export, publish, build):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``glyphforge``."""
    args = _glyphforge_parser().parse_args(argv)
    return run(args.action, args)
