"""``glyphforge build scenes``: a derived dataset built in parallel, locally or into a URL data dir (`glyphforge.build`,
whose reader of the entry, where it lies, says what was built and where)."""
from __future__ import annotations

import argparse
from typing import Any

from glyphforge.cli.args import UsageError, add_scene_arguments, name_value, scene_spec
from glyphforge.cli.common import Formatter, add_command, add_fetch_arguments, data_context
from glyphforge.scenes.arguments import preset_commands
from glyphforge.session import check_session


def _build_scenes(args: argparse.Namespace) -> int:
    from glyphforge.builds.making.builder import build
    from glyphforge.builds.making.destinations import check_destination

    context = data_context(args, remote=True)
    try:
        spec = scene_spec(args)
        check_session(args.session, dict(args.session_options))
        check_destination(context)
    except (ValueError, TypeError) as error:  # the spec's, session's and destination's checks: bad arguments
        raise UsageError(str(error)) from None
    dataset = build(spec, session=args.session, context=context, progress=not args.quiet,
                    session_options=dict(args.session_options))
    print(f"built {len(dataset)} scenes: entry {dataset.key} at {dataset.url or dataset.path}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add build to ``glyphforge``'s sub-commands ``commands``."""
    build = commands.add_parser("build", help="build a derived dataset in parallel",
                                epilog="example:\n  glyphforge build scenes --glyphs font --n-examples 2000",
                                formatter_class=Formatter)
    build_commands = build.add_subparsers(dest="build_command", required=True, metavar="DATASET")
    scenes = add_command(build_commands, "scenes", "scattered glyphs on backgrounds, with boxes and labels",
                         "glyphforge build scenes --n-examples 100000 --glyphs emnist --characters 0123456789 "
                         "--backgrounds hard --session processes:8", _build_scenes)
    _add_build_arguments(scenes)
    for name, (make_spec, fields, summary) in preset_commands().items():
        preset = add_command(build_commands, name, f"preset: {summary}",
                             f"glyphforge build {name} --glyphs font --n-examples 100", _build_scenes)
        _add_build_arguments(preset, make_spec, fields)


def _add_build_arguments(parser: argparse.ArgumentParser, make_spec: Any = None, fields: Any = None) -> None:
    parser.add_argument("--session", default="local",
                        help="where to run: local, processes[:N], dask[:N] (a LocalCluster), dask://HOST:PORT, "
                             "slurm[:JOBS], pbs[:JOBS]")
    parser.add_argument("--session-option", action="append", dest="session_options", type=name_value,
                        default=[], metavar="NAME=VALUE",
                        help="a session option (repeatable), e.g. cores=4 memory=16GB queue=normal walltime=02:00:00 "
                             "for slurm/pbs (any dask-jobqueue keyword)")
    add_scene_arguments(parser, make_spec, fields)
    add_fetch_arguments(parser)
