"""``glyphforge export``: a built dataset's arrays as ``.npy`` files, or as Parquet files."""
from __future__ import annotations

import argparse
import time

from glyphforge.builds.export import FORMATS
from glyphforge.cli.args import UsageError, output_path
from glyphforge.cli.common import add_command, add_fetch_arguments, data_context, find_built_target
from glyphforge.hf import MissingExtraError, require
from glyphforge.textfmt import human_size


def _export(args: argparse.Namespace) -> int:
    if args.format == "parquet":
        try:
            require("glyphforge export --format parquet")
        except MissingExtraError as error:
            raise UsageError(str(error)) from None
    dataset = find_built_target(args.target, data_context(args, remote=True))
    started = time.perf_counter()
    path = dataset.export(args.directory, format=args.format, overwrite=args.overwrite)
    seconds = time.perf_counter() - started
    print(f"exported {dataset.entry.kind} {dataset.key[:12]} ({len(dataset)} examples, "
          f"{human_size(dataset.nbytes)}) to {path} in {seconds:.1f} s")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add export to ``glyphforge``'s sub-commands ``commands``."""
    export = add_command(commands, "export", "write a built dataset's arrays as .npy files (+ metadata.json) for "
                         "memory-mapping, or as Parquet files (--format parquet)",
                         "glyphforge export scenes ./scenes-npy\n"
                         "  glyphforge export scenes ./scenes-parquet --format parquet",
                         _export)
    export.add_argument("target", help="the kind of a built dataset with one entry (KIND:newest: its newest) or a "
                                       "cache key (prefix)")
    export.add_argument("directory", type=output_path, help="where to write <array>.npy (or data-*.parquet) and "
                                                     "metadata.json")
    export.add_argument("--format", choices=list(FORMATS), default="npy",
                        help='file format (default: npy; parquet needs pip install "glyphforge[hf]")')
    export.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export in the directory (nothing else is ever replaced)")
    add_fetch_arguments(export)
