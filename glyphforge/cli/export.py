"""``glyphforge export``: a built dataset's arrays as ``.npy`` files or Parquet files, or a scene dataset as COCO,
YOLO or MOTChallenge files."""
from __future__ import annotations

import argparse
import time

from glyphforge.builds.export.files import FORMATS
from glyphforge.builds.export.frames import ExportFormatError
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
    try:
        path = dataset.export(args.directory, format=args.format, overwrite=args.overwrite)
    except (ExportFormatError, MissingExtraError) as error:  # the dataset cannot be exported so: said before any work
        raise UsageError(str(error)) from None
    seconds = time.perf_counter() - started
    print(f"exported {dataset.entry.kind} {dataset.key[:12]} ({len(dataset)} examples, "
          f"{human_size(dataset.nbytes)}) to {path} in {seconds:.1f} s")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add export to ``glyphforge``'s sub-commands ``commands``."""
    export = add_command(commands, "export", "write a built dataset's arrays as .npy files (+ metadata.json) for "
                         "memory-mapping, as Parquet files (--format parquet), or a scene dataset's images and boxes "
                         "for detectors and trackers (--format coco, yolo or mot)",
                         "glyphforge export scenes ./scenes-npy\n"
                         "  glyphforge export scenes ./scenes-parquet --format parquet\n"
                         "  glyphforge export scenes ./scenes-coco --format coco",
                         _export)
    export.add_argument("target", help="the kind of a built dataset with one entry (KIND:newest: its newest) or a "
                                       "cache key (prefix)")
    export.add_argument("directory", type=output_path, help="where to write <array>.npy (or data-*.parquet, or the "
                                                     "format's images and annotations) and metadata.json")
    export.add_argument("--format", choices=list(FORMATS), default="npy",
                        help='file format (default: npy; parquet needs pip install "glyphforge[hf]"; coco (with '
                             'masks: pip install "glyphforge[coco]") and yolo for scenes and videos, mot for videos)')
    export.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export in the directory (nothing else is ever replaced)")
    add_fetch_arguments(export)
