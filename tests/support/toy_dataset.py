"""A toy dataset registered at run time, as a third party would: five grey 8x8 squares per grey level.

`register_toy` registers it with every part a record may have (``prepare``, ``load``,
``preview``, an entry label, ``"level 7 native sizes"``, and exports), its glyphs for scenes
and its command-line options: ``prepare-data toy --toy-level N`` (typed, checked by the named
converter `grey_level`) and ``glyphforge build scenes --glyphs toy --toy-shade N``.

``python -m support.toy_dataset COMMAND ARGS...`` (from ``tests/``) registers it, then runs
``prepare-data`` or ``glyphforge`` (COMMAND) with ARGS in that fresh process, as the console
scripts do: the real command line with a dataset glyphforge does not ship.

Square ``i`` of level ``L`` is filled with ``40 * i + L``; its class is ``"square i"``.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from glyphforge.cache import Entry
from glyphforge.cli.dataset_options import Option, register_options
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.labels import shape_label
from glyphforge.scenes.glyph_datasets import GlyphDataset, register_glyphs

CLASSES = [f"square {i}" for i in range(5)]


def grey_level(level: int) -> int:
    """The converter of ``--toy-level`` and ``--toy-shade``: a level from 0 to 215 (the brightest square is 255)."""
    if not 0 <= level <= 215:
        raise ValueError(f"a toy grey level is 0 to 215, got {level}")
    return level


def squares(level: int) -> np.ndarray:
    """The five squares of ``level``, ``(5, 8, 8)`` uint8."""
    return np.stack([np.full((8, 8), 40 * i + level, np.uint8) for i in range(len(CLASSES))])


def prepare_toy(*, shapes=(), context=None, data_dir=None, mirrors=None, verify=None, progress=None, offline=None,
                level: int = 3) -> list[Entry]:
    """Write the squares of ``level`` into the cache (kind ``toy``); ``shapes`` are ignored (8x8 only)."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)

    def write(writer) -> None:
        writer.write("squares.pklz", squares(level))
        writer.meta["n_images"] = len(CLASSES)

    return [context.store.get_or_create("toy", {"level": level}, write)]


def load_toy(classes: Iterable[str] | None = None, *, level: int = 3, context=None, data_dir=None,
             download=None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(x, y, classes)``: the squares of ``classes`` (None: all), sorted by name, preparing them if allowed."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download)
    entry = context.store.get("toy", {"level": level})
    if entry is None:
        if not context.download:
            raise ValueError(f"toy level {level} is not prepared: run `prepare-data toy --toy-level {level}` first")
        [entry] = prepare_toy(context=context, level=level)
    names = sorted(CLASSES if classes is None else classes)
    x = entry.load("squares.pklz")[[CLASSES.index(name) for name in names]]
    return x, np.arange(len(names), dtype=np.int64), names


def preview_toy(entry: Entry, n: int, rng: np.random.Generator, context) -> tuple[np.ndarray, list[str]]:
    """The first ``n`` squares of ``entry`` and their class names."""
    images = entry.load("squares.pklz")[:n]
    return images, CLASSES[: len(images)]


def toy_glyphs(classes, *, example_range, shape, context=None, data_dir=None, level: int = 3):
    """Scenes' glyphs: the squares of ``classes`` at ``level`` (cache only; ``example_range`` and ``shape`` ignored)."""
    return load_toy(classes, level=level, context=context, data_dir=data_dir, download=False)


def toy_label(entry: Entry) -> str:
    """``"level 7 native sizes"``."""
    return f"level {entry.params['level']} {shape_label(entry)}"


def register_toy() -> registry.DatasetRecord:
    """Register the toy dataset (replacing an earlier registration), its glyphs and its options; return its record."""
    record = registry.register(registry.DatasetRecord(
        name="toy", summary="five grey squares (a test dataset)", prepare=prepare_toy, load=load_toy,
        preview=preview_toy, entry_label=toy_label, exports=("load_toy", "prepare_toy"),
    ))
    register_glyphs("toy", GlyphDataset(toy_glyphs))
    register_options(
        "toy",
        prepare=(Option("--toy-level", "level", "grey level of the squares", value=int, default="3",
                        convert=grey_level),),
        scenes=(Option("--toy-shade", "level", "grey level of the toy glyphs", value=int, metavar="SHADE",
                       convert=grey_level),),
    )
    return record


@contextmanager
def prepared_toy(data_dir: Path) -> Iterator[Path]:
    """The toy dataset registered and prepared in ``data_dir`` (level 3) for the block; unregistered after."""
    register_toy()
    prepare_toy(data_dir=data_dir)
    try:
        yield data_dir
    finally:
        registry.unregister("toy")


def main(argv: list[str]) -> int:
    """Register the toy, then run ``prepare-data`` or ``glyphforge`` (``argv[0]``) with the rest of ``argv``."""
    from glyphforge import cli

    register_toy()
    command, *rest = argv
    return {"prepare-data": cli.prepare_data_main, "glyphforge": cli.main}[command](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
