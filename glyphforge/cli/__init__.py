"""The ``glyphforge`` command (and ``prepare-data``, the alias of ``glyphforge prepare``): one module per command group.

Each command calls a library function, so what a command does, a Python user can do too.
`common` holds what the commands share (parsers, the data context, running a command: one
readable paragraph per error, exit status 1, or 2 for bad arguments; ``-v`` adds the
traceback; output into a closed pipe ends quietly with status 141), `args` the argument types
and `errors` the target lookups.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from glyphforge.cli import build, cache, export, info, prepare, preview, publish, view, warmup
from glyphforge.cli.common import new_parser, quiet_on_a_closed_pipe, run

__all__ = ["main", "prepare_data_main"]


@quiet_on_a_closed_pipe
def prepare_data_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prepare-data``, the alias of ``glyphforge prepare``."""
    args = prepare.prepare_parser().parse_args(argv)
    return run(prepare.prepare_data, args)


def _glyphforge_parser() -> argparse.ArgumentParser:
    parser = new_parser("glyphforge", "Prepare datasets, inspect the cache, preview data and build derived datasets.",
                        "glyphforge build scenes --glyphs font --n-examples 2000")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (prepare, info, cache, preview, view, warmup, export, publish, build):
        group.add_commands(commands)
    return parser


@quiet_on_a_closed_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``glyphforge``."""
    args = _glyphforge_parser().parse_args(argv)
    return run(args.action, args)
