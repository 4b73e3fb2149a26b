"""Scenes per second per core: `ScatteredGlyphs` shards against a straightforward loop.

    python benchmarks/bench_scenes.py [--scenes 20000] [--loop-scenes 2000] [--data-dir DIR]

Workload (the issue's): 48x48 scenes, 1-3 EMNIST glyphs (byclass, all 62 classes) resized
to 14x14, max_overlap 0.2, white glyphs on random crops of the "hard" textures.

Glyphs: real EMNIST when ``--data-dir`` holds a prepared byclass entry; otherwise a
synthetic ``gzip.zip`` in NIST's layout (tests/support/synthetic_emnist.py: stroke-like
28x28 images of EMNIST shape) is prepared into a temporary data dir, and the output says
so. Textures: the real ones, served from ``../shared/data`` as an offline mirror.

Both sides run on one core (``NUMBA_NUM_THREADS=1``, set before numba is imported) and
produce the same kind of scenes from the same glyph images and textures: the spec's
``make_shard`` (numba kernels) and `loop_scenes`, the same sampling and compositing
written as a plain numpy/Python loop over scenes and glyphs.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["NUMBA_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from glyphforge.builds.making.shards import shard_rng  # noqa: E402
from glyphforge.scenes.sources import GlyphPool  # noqa: E402
from glyphforge.scenes.spec import ScatteredGlyphs  # noqa: E402


def hard_textures() -> list[str]:
    """The "hard" textures present in ../shared/data (space.jpg is not carried there)."""
    from glyphforge.datasets.backgrounds import hard_background_names

    return [name for name in hard_background_names() if (SHARED_DATA / "backgrounds" / f"{name}.jpg").exists()]


def spec_for(n_scenes: int) -> ScatteredGlyphs:
    """The benchmark's workload as a spec."""
    return ScatteredGlyphs(
        n_scenes, image_shape=(48, 48), glyphs="emnist", glyph_shape=(14, 14), min_glyphs=1, max_glyphs=3,
        max_overlap=0.2, backgrounds=hard_textures(), seed=0, shard_size=1000,
    )


def prepare_glyphs(data_dir: Path | None, scratch: Path) -> tuple[Path, str]:
    """Return a data dir holding EMNIST byclass, and a description of where it came from."""
    from glyphforge.datasets.emnist import load_emnist, prepare_emnist

    if data_dir is not None:
        load_emnist("0", data_dir=data_dir, download=False)  # fails clearly when not prepared
        return data_dir, f"real EMNIST byclass from {data_dir}"
    sys.path.insert(0, str(ROOT / "tests"))
    from support.synthetic_emnist import write_synthetic_emnist

    archive = write_synthetic_emnist(scratch / "gzip.zip", counts={"byclass": (40_000, 6_000)}, keep_arrays=False)
    prepare_emnist(split="byclass", archives={"gzip.zip": archive.path}, verify=False, data_dir=scratch, progress=False)
    return scratch, "SYNTHETIC EMNIST-shaped glyphs (real EMNIST not available: pass --data-dir)"


def loop_scenes(
    pool: GlyphPool, textures: list[np.ndarray], n: int, rng: np.random.Generator, spec: ScatteredGlyphs
) -> dict[str, np.ndarray]:
    """The same scenes as the spec, written as a straightforward numpy/Python loop."""
    height, width = spec.image_shape
    glyph_h, glyph_w = spec.glyph_shape
    colours = np.array(spec.colours, np.float64)
    images = np.empty((n, height, width, 3), np.uint8)
    boxes = np.full((n, spec.max_glyphs, 4), -1, np.float32)
    labels = np.full((n, spec.max_glyphs), -1, np.int64)
    for s in range(n):
        texture = textures[rng.integers(len(textures))]
        top = rng.integers(texture.shape[0] - height + 1)
        left = rng.integers(texture.shape[1] - width + 1)
        scene = texture[top : top + height, left : left + width].astype(np.float64)
        placed: list[tuple[int, int, int, int]] = []
        for k in range(rng.integers(spec.min_glyphs, spec.max_glyphs + 1)):
            label = rng.integers(len(pool.class_names))
            source = pool.images[pool.starts[label] + rng.integers(pool.counts[label])]
            glyph = source  # the spec loads glyphs already at glyph_shape; resize any that are not
            if source.shape != (glyph_h, glyph_w):
                glyph = np.asarray(Image.fromarray(source).resize((glyph_w, glyph_h), Image.Resampling.BOX))
            rows, cols = np.flatnonzero(glyph.any(1)), np.flatnonzero(glyph.any(0))
            ink = (rows[0], cols[0], rows[-1] + 1, cols[-1] + 1) if len(rows) else (0, 0, glyph_h, glyph_w)
            box_h, box_w = ink[2] - ink[0], ink[3] - ink[1]
            for _ in range(100):
                y, x = rng.integers(height - box_h + 1), rng.integers(width - box_w + 1)
                box = (y, x, y + box_h, x + box_w)
                if all(_overlap_ok(box, other, spec.max_overlap) for other in placed):
                    break
            else:
                raise RuntimeError("loop baseline: could not place a glyph")
            placed.append(box)
            alpha = glyph[ink[0] : ink[2], ink[1] : ink[3], None] / 255.0
            colour = colours[rng.integers(len(colours))]
            region = scene[y : y + box_h, x : x + box_w]
            region[:] = region * (1 - alpha) + colour * alpha
            boxes[s, k], labels[s, k] = box, label
        images[s] = np.rint(scene).astype(np.uint8)
    return {"images": images, "boxes": boxes, "labels": labels}


def _overlap_ok(a: tuple[int, ...], b: tuple[int, ...], max_overlap: float) -> bool:
    height = min(a[2], b[2]) - max(a[0], b[0])
    width = min(a[3], b[3]) - max(a[1], b[1])
    if height <= 0 or width <= 0:
        return True
    shared = height * width
    return (
        shared <= max_overlap * (a[2] - a[0]) * (a[3] - a[1])
        and shared <= max_overlap * (b[2] - b[0]) * (b[3] - b[1])
    )


def rate(make, n_scenes: int, repeats: int = 3) -> float:
    """Best scenes/s of ``repeats`` runs of ``make()`` producing ``n_scenes``."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        make()
        best = min(best, time.perf_counter() - started)
    return n_scenes / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=20_000, help="scenes made by the spec per run")
    parser.add_argument("--loop-scenes", type=int, default=2_000, help="scenes made by the loop per run")
    parser.add_argument("--data-dir", type=Path, default=None, help="a data dir with EMNIST byclass prepared")
    args = parser.parse_args()
    if not (SHARED_DATA / "backgrounds").is_dir():
        sys.exit(f"the real textures are needed: {SHARED_DATA / 'backgrounds'} is missing")
    os.environ["GLYPHFORGE_MIRROR"] = SHARED_DATA.as_uri()  # serves <mirror>/backgrounds/<name>
    os.environ["GLYPHFORGE_OFFLINE"] = "1"
    with tempfile.TemporaryDirectory(prefix="bench-scenes-") as scratch:
        data_dir, source = prepare_glyphs(args.data_dir, Path(scratch))
        spec = spec_for(args.scenes)
        spec.prepare(data_dir)  # as build's driver does: the glyphs at 14x14 and the textures
        pool, textures = spec.glyph_pool(data_dir), spec.textures(data_dir)
        print(f"glyphs: {source}; {len(pool.images):,} images, {len(pool.class_names)} classes")
        print(
            f"textures: the hard backgrounds in ../shared/data ({', '.join(spec.backgrounds)}); "
            "48x48 scenes, 1-3 glyphs of 14x14; 1 core"
        )
        spec.make_shard(0, shard_rng(0, 0), 10, data_dir=data_dir)  # numba: load the on-disk cache (or compile once)

        def kernels() -> None:
            for index in range(-(-args.scenes // spec.shard_size)):
                n = min(spec.shard_size, args.scenes - index * spec.shard_size)
                spec.make_shard(index, shard_rng(spec.seed, index), n, data_dir=data_dir)

        texture_list = [
            textures.flat[o : o + h * w * 3].reshape(h, w, 3)
            for o, h, w in zip(textures.offsets, textures.heights, textures.widths, strict=True)
        ]
        fast = rate(kernels, args.scenes)
        slow = rate(lambda: loop_scenes(pool, texture_list, args.loop_scenes, np.random.default_rng(0), spec),
                    args.loop_scenes)
        font = ScatteredGlyphs(2000, glyphs="font", backgrounds=spec.backgrounds)
        font_rate = rate(lambda: font.make_shard(0, shard_rng(0, 0), 2000, data_dir=data_dir), 2000, repeats=1)
    print(f"{'method':42s} {'scenes/s':>10s} {'ratio':>7s}")
    print(f"{'ScatteredGlyphs.make_shard (numba)':42s} {fast:10,.0f} {fast / slow:6.1f}x")
    print(f"{'straightforward numpy/Python loop':42s} {slow:10,.0f} {1:6.1f}x")
    print(f"{'font glyphs (Pillow rendering per glyph)':42s} {font_rate:10,.0f} {font_rate / slow:6.1f}x")
    print(f"goal: >= 20,000 scenes/s per core and >= 10x the loop: "
          f"{'met' if fast >= 20_000 and fast >= 10 * slow else 'NOT met'}")


if __name__ == "__main__":
    main()
