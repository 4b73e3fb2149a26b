"""Hugging Face and Parquet: ``export --format parquet`` scenes per second, and ``to_hf()`` against
``datasets.Dataset.from_generator`` over ``ds[i]``, measured in the same run.

    python benchmarks/bench_hf.py [--scenes 200000] [--hf-scenes 20000] [--hf-images 10000] [--textures]
                                  [--workdir DIR]

Needs the ``hf`` extra (``pip install -e ".[hf]"``). Workload: 48x48x3 scenes of 1-3 14x14 font
glyphs (rendered by Pillow: no download) on flat colours, or with ``--textures`` on the "hard"
textures of ``../shared/data`` (photographs: they hardly compress, so inflating the shards costs
about 4x more), 1,000 scenes a shard, built once into ``--workdir`` on ``processes:2`` and reused
by later runs.

* export: ``ds.export(dir, format="parquet")`` of every scene (wall and CPU seconds), and the
  ``.npy`` export of the same dataset for scale. Goal: >= 50,000 scenes/s on 2 cores.
* to_hf: a fresh reader's ``ds.to_hf()`` (decoding the shards included: ``random_access="decode"``) against
  ``Dataset.from_generator`` yielding ``ds[i]`` rows with the same features, on the first
  ``--hf-scenes`` scenes (a build of that size), and on ``--hf-images`` 28x28 MNIST-sized images of
  a map-style dataset (what ``gf.MNIST(...)`` is). Goal: >= 10x.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

import glyphforge as gf  # noqa: E402
from glyphforge.batching import MapStyleDataset  # noqa: E402
from glyphforge.context import DataContext  # noqa: E402
from glyphforge.hf import require  # noqa: E402


def scenes(n: int, data_dir: Path, textures: bool) -> gf.BuiltDataset:
    """``n`` font scenes in ``data_dir`` (built once, on processes:2), on the hard textures or flat colours."""
    options: dict = {"background_colours": ["navy", "white", "black", "olive"]}
    if textures:
        from glyphforge.datasets.backgrounds import hard_background_names

        names = [name for name in hard_background_names() if (SHARED_DATA / "backgrounds" / f"{name}.jpg").exists()]
        options = {"backgrounds": names}
    spec = gf.ScatteredGlyphs(n, image_shape=(48, 48), glyphs="font", characters="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                              glyph_shape=(14, 14), min_glyphs=1, max_glyphs=3, seed=0, shard_size=1000, **options)
    context = DataContext.resolve(data_dir=data_dir, mirrors=[SHARED_DATA.as_uri()] if "backgrounds" in options
                                  else None)
    return gf.build(spec, context=context, session="processes:2", progress=False)


def timed(work) -> tuple[object, float, float]:
    """``work()``'s result, wall seconds and CPU seconds (this process and its children)."""
    start, cpu = time.perf_counter(), _cpu()
    result = work()
    return result, time.perf_counter() - start, _cpu() - cpu


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def export(ds: gf.BuiltDataset, out: Path) -> None:
    """Parquet then .npy export of every scene into ``out`` (a folder this run made), timed."""
    for format in ("parquet", "npy"):
        target = out / format
        _, wall, cpu = timed(lambda: ds.reopened().export(target, format=format))  # noqa: B023
        size = sum(path.stat().st_size for path in target.iterdir())
        print(f"export {format:8s} {len(ds):,} scenes in {wall:6.2f} s (CPU {cpu:6.2f} s): {len(ds) / wall:10,.0f} "
              f"scenes/s, {ds.nbytes / wall / 1e6:6.0f} MB/s decoded, {size / 1e6:7.1f} MB on disk")
        shutil.rmtree(target)


def compare(what: str, dataset, rows, cache: Path) -> float:
    """``to_hf()`` against ``Dataset.from_generator`` over ``rows(i)``; return the ratio."""
    import datasets

    datasets.disable_progress_bars()  # its bars would fill the report
    converted, wall, cpu = timed(dataset.to_hf)
    features = converted.features

    def generate():
        for i in range(len(dataset)):
            yield rows(i)

    generated, gen_wall, gen_cpu = timed(lambda: datasets.Dataset.from_generator(
        generate, features=features, cache_dir=str(cache)))
    middle = [part.with_format("numpy")[len(dataset) // 2] for part in (generated, converted)]  # images: pixels
    assert len(generated) == len(converted) and all(np.array_equal(middle[0][name], middle[1][name])
                                                    for name in converted.column_names)
    ratio = gen_wall / wall
    print(f"{what}: to_hf {wall:6.2f} s (CPU {cpu:5.2f}), from_generator over ds[i] {gen_wall:6.2f} s (CPU "
          f"{gen_cpu:5.2f}): {ratio:5.1f}x")
    return ratio


class Images(MapStyleDataset):
    """A map-style dataset of MNIST's shape (what gf.MNIST is): random 28x28 images, 10 classes."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        self.labels = rng.integers(0, 10, n)
        self.classes = [str(digit) for digit in range(10)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", type=int, default=200_000)
    parser.add_argument("--hf-scenes", type=int, default=20_000)
    parser.add_argument("--hf-images", type=int, default=10_000)
    parser.add_argument("--textures", action="store_true", help="scenes on the hard textures, not flat colours")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-hf")
    args = parser.parse_args()
    require("benchmarks/bench_hf.py")
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; backgrounds: "
          f"{'hard textures' if args.textures else 'flat colours'}")
    ds = scenes(args.scenes, args.workdir / "data", args.textures)
    print(f"{ds!r}, {ds.nbytes / 1e9:.2f} GB decoded")
    scratch = Path(tempfile.mkdtemp(prefix="bench-hf-", dir=args.workdir))  # made here: the only thing removed
    try:
        export(ds, scratch)
        small = scenes(args.hf_scenes, args.workdir / "data", args.textures)

        def scene_row(i: int) -> dict:
            image, targets = small[i]
            return {"images": image, **targets}

        small = small.reopened(random_access="decode")  # both sides decode the shards (no decoded copy of a run)
        compare(f"{len(small):,} scenes", small.reopened(), scene_row, scratch / "hf-cache")
        images = Images(args.hf_images)
        compare(f"{len(images):,} 28x28 images (map-style)", images,
                lambda i: dict(zip(("image", "label"), images[i], strict=True)), scratch / "hf-cache")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
