"""Omniglot: convert once, then load from the cache, against decoding every PNG on each load.

    python benchmarks/bench_omniglot.py [--sets small1 small2] [--shape 28x28] [--repeat 5] [--data-dir DIR]

Sets ``small1`` and ``small2`` (the default) come from ``../shared/data`` as a file://
mirror into a temporary data dir. The full sets (``background``, ``evaluation``) need
``--data-dir`` holding their zips in ``raw/omniglot/`` (the old approach decodes their PNGs).

The old approach (what the old scripts did on every load): read every PNG file of the
extracted set from disk, decode it with Pillow, invert it, resize it (Pillow ``BOX``,
per image) when a shape is asked for, stack and shuffle. Extraction is done once
beforehand and not timed (the old scripts cloned the repository once). The new approach
is ``load_omniglot`` of every class of the sets from the cache entries. Times are medians.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from glyphforge.datasets.omniglot.dataset import RESOURCES, load_omniglot, prepare_omniglot  # noqa: E402


def parse_shape(text: str) -> tuple[int, int]:
    height, width = text.lower().split("x")
    return int(height), int(width)


def median_seconds(task: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        task()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def old_load(pngs: list[Path], shape: tuple[int, int] | None, seed: int) -> np.ndarray:
    """Decode (and resize) every PNG, as the old code did on each load."""
    images = []
    for path in pngs:
        with Image.open(path) as image:
            grey = image.convert("L")
            if shape is not None:
                grey = grey.resize((shape[1], shape[0]), Image.BOX)
            images.append(255 - np.asarray(grey))
    stacked = np.stack(images)
    return stacked[np.random.default_rng(seed).permutation(len(stacked))]


def extract(zip_path: Path, folder: Path) -> list[Path]:
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder)
    return sorted(folder.rglob("*.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["small1", "small2"], choices=list(RESOURCES))
    parser.add_argument("--shape", type=parse_shape, default=(28, 28), help="resized shape to compare (HxW)")
    parser.add_argument("--repeat", type=int, default=5, help="cache loads timed (median)")
    parser.add_argument("--old-repeat", type=int, default=2, help="PNG-decoding loads timed (median)")
    parser.add_argument("--data-dir", type=Path, default=None, help="data dir with the zips (default: temporary)")
    args = parser.parse_args()
    sets = tuple(args.sets)

    with tempfile.TemporaryDirectory(prefix="bench-omniglot-") as scratch:
        data_dir = args.data_dir or Path(scratch) / "data"
        mirrors = [SHARED_DATA.as_uri()] if SHARED_DATA.is_dir() else []
        start = time.perf_counter()
        entries = prepare_omniglot(sets=sets, data_dir=data_dir, mirrors=mirrors, progress=False)
        convert = time.perf_counter() - start
        start = time.perf_counter()
        prepare_omniglot(sets=sets, shapes=[args.shape], data_dir=data_dir, progress=False)
        resize_once = time.perf_counter() - start
        n_images = sum(entry.meta["n_images"] for entry in entries)
        cached_bytes = sum(entry.size_bytes for entry in entries)
        print(f"sets {', '.join(sets)}: {n_images:,} images, {cached_bytes / 1e6:.1f} MB cached at 105x105")
        print(f"convert (fetch + decode + write, once): {convert:.2f} s; "
              f"{args.shape[0]}x{args.shape[1]} variant (once): {resize_once:.2f} s")

        pngs = []
        for set_name in sets:
            zip_path = data_dir / "raw" / "omniglot" / RESOURCES[set_name].filename
            pngs += extract(zip_path, Path(scratch) / "extracted" / set_name)
        assert len(pngs) == n_images, (len(pngs), n_images)

        print(f"\n{'shape':>9} {'decode PNGs (old)':>18} {'cache load':>11} {'speed-up':>9}")
        for shape in (None, args.shape):
            old = median_seconds(lambda shape=shape: old_load(pngs, shape, seed=0), args.old_repeat)
            load_omniglot(sets=sets, shape=shape, seed=0, data_dir=data_dir, download=False)  # warm the page cache
            new = median_seconds(
                lambda shape=shape: load_omniglot(sets=sets, shape=shape, seed=0, data_dir=data_dir, download=False),
                args.repeat,
            )
            label = "105x105" if shape is None else f"{shape[0]}x{shape[1]}"
            print(f"{label:>9} {old * 1e3:>15.1f} ms {new * 1e3:>8.1f} ms {old / new:>8.1f}x")


if __name__ == "__main__":
    main()
