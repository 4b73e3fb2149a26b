"""``glyphforge preview``: a PNG grid of examples of a dataset, a cache entry or a built dataset."""
from __future__ import annotations

import argparse
from pathlib import Path

from glyphforge.cli.args import output_path, positive
from glyphforge.cli.common import add_command, find_built_target
from glyphforge.cli.errors import target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.storage.location import is_url


def _preview(args: argparse.Namespace) -> int:
    from glyphforge.previews import find_target, preview_built, preview_entry

    if is_url(args.data_dir):  # a built dataset read where it lies
        dataset = find_built_target(args.target, DataContext.resolve(data_dir=args.data_dir))
        path = preview_built(dataset, out=args.out, n=args.n, seed=args.seed)
    else:
        context = DataContext.resolve(data_dir=args.data_dir, download=False)
        with target_lookup():
            entry = find_target(context.store, args.target)
        path = preview_entry(entry, context, out=args.out, n=args.n, seed=args.seed)
    print(f"wrote {path}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add preview to ``glyphforge``'s sub-commands ``commands``."""
    preview = add_command(commands, "preview", "write a PNG grid of examples of a dataset or a cache entry",
                          "glyphforge preview emnist --out emnist.png", _preview)
    preview.add_argument("target", help=f"a dataset ({', '.join(registry.registered())}), the kind of a built dataset "
                                        "with one entry (KIND:newest: its newest), or a cache key (prefix) of any "
                                        "entry")
    preview.add_argument("--out", type=output_path, default=Path("preview.png"), help="PNG file to write")
    preview.add_argument("-n", type=positive, default=16, help="number of examples (1 or more)")
    preview.add_argument("--seed", type=int, default=0, help="which examples to pick")
