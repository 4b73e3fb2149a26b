"""``glyphforge preview``: a PNG grid of examples of a dataset, a cache entry or a built dataset."""
from __future__ import annotations

import argparse
from pathlib import Path

from glyphforge.cache import Entry
from glyphforge.cli.args import UsageError, output_path, positive
from glyphforge.cli.common import add_command, find_built_target
from glyphforge.cli.errors import target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.storage.location import is_url


def _preview(args: argparse.Namespace) -> int:
    from glyphforge.previews import find_target, preview_built, preview_entry

    if is_url(args.data_dir):  # a built dataset read where it lies
        dataset = find_built_target(args.target, DataContext.resolve(data_dir=args.data_dir))
        _check_animation(args, dataset.entry)
        path = preview_built(dataset, out=args.out, n=args.n, seed=args.seed, animate=args.animate)
    else:
        context = DataContext.resolve(data_dir=args.data_dir, download=False)
        with target_lookup():
            entry = find_target(context.store, args.target)
        _check_animation(args, entry)
        path = preview_entry(entry, context, out=args.out, n=args.n, seed=args.seed, animate=args.animate)
    print(f"wrote {path}")
    return 0


def _check_animation(args: argparse.Namespace, entry: Entry) -> None:
    """With --animate, refuse an entry of still images before any work (exit status 2)."""
    from glyphforge.previews import check_animation

    if args.animate:
        try:
            check_animation(entry)
        except ValueError as error:
            raise UsageError(str(error)) from None


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add preview to ``glyphforge``'s sub-commands ``commands``."""
    preview = add_command(commands, "preview", "write a PNG grid of examples of a dataset or a cache entry (a row "
                          "of frames per video, or with --animate an animation)",
                          "glyphforge preview emnist --out emnist.png\n"
                          "  glyphforge preview scenes --out frames.gif --animate", _preview)
    preview.add_argument("target", help=f"a dataset ({', '.join(registry.registered())}), the kind of a built dataset "
                                        "with one entry (KIND:newest: its newest), or a cache key (prefix) of any "
                                        "entry")
    preview.add_argument("--out", type=output_path, default=Path("preview.png"),
                         help="PNG file to write (with --animate: an animated PNG, or a GIF when it ends in .gif)")
    preview.add_argument("-n", type=positive, default=16, help="number of examples (1 or more)")
    preview.add_argument("--seed", type=int, default=0, help="which examples to pick")
    preview.add_argument("--animate", action="store_true",
                         help="for a built video dataset: play its frames, each a grid of the videos' frame t")
