"""The scene family (issue 43): glyphforge against dps's own loop, Moving MNIST, masks, reading.

    git clone https://github.com/e2crawfo/dps /tmp/dps      # by hand: glyphforge ships none of dps
    python benchmarks/bench_scene_family.py --dps /tmp/dps [--rounds 3] [--parts ratio,mmnist,masks,read]
    python benchmarks/bench_scene_family.py --dps /tmp/dps --dps-only   # dps alone (no new specs needed)
    python benchmarks/bench_scene_family.py --dps /tmp/dps --profile video   # cProfile of one spec's make_shard

Two specs, each made by glyphforge and by dps's algorithm (`dps_reference`: dps's
``PatchesDataset._make`` from the checkout, its imports stubbed), from the same glyph images
(synthetic EMNIST-shaped glyphs prepared into a scratch data dir, or real EMNIST with
``--data-dir``), at the same sizes, on black:

* static: 48x48 scenes, 1-3 glyphs of 14x14 (all 62 classes), max_overlap 0.2 (glyphforge: a
  fraction of either box; dps counts overlap in pixels: 0.2 x 14 x 14 = 39), white;
* video (Moving MNIST, the preset ``glyphforge.moving_mnist`` where the tree has it): 64x64,
  20 frames, two 28x28 digits moving at ``--speed`` pixels a frame in a random direction,
  bouncing off the walls, any overlap.

Parts (each best of ``--rounds``, every figure printed beside the load average):

* ``ratio``: examples/s per core (``NUMBA_NUM_THREADS=1``; the spec's ``make_shard`` over
  shards, dps's loop writing to a list: wall clock and per CPU second) and glyphforge / dps
  (goal >= 50x);
* ``mmnist``: Moving MNIST built through ``glyphforge.build`` on a warmed ``processes:2``
  session: frames/s (goal >= 50,000);
* ``masks``: the static and video specs built on ``processes:2`` with ``masks=True`` and
  without, alternated (goal <= 1.3x), and the CPU seconds of the builder's work on a few shards
  in this process (make, write, hash: the steadier figure on a loaded machine). Every timed
  build has a seed of its own (its entry removed after), so none meets a cached entry;
* ``read``: a shuffled epoch of ``ds.stream(256)`` (three, in a fresh process each: the
  later two's best) over today's static scenes, the same with masks, and Moving MNIST with
  masks: examples/s and decoded MB/s (every array of a row), by the wall clock and per CPU
  second, and peak RSS: the new arrays must read at today's MB/s.
"""
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # one core per process: per-core figures, and each worker one core

import argparse  # noqa: E402
import cProfile  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from dps_reference import DpsReference  # noqa: E402

DIGITS = "0123456789"
FRAMES = 20


# -- the specs ----------------------------------------------------------------------------
def static_spec(n: int, *, masks: bool = False, seed: int = 0) -> Any:
    """48x48 scenes of 1-3 14x14 EMNIST glyphs, black (today's `ScatteredGlyphs`; ``masks`` the new array)."""
    import glyphforge as gf

    extra = {"masks": True} if masks else {}
    return gf.ScatteredGlyphs(n, image_shape=(48, 48), glyphs="emnist", glyph_shape=(14, 14), min_glyphs=1,
                              max_glyphs=3, max_overlap=0.2, seed=seed, shard_size=1000, **extra)


#: The video spec's fields (Srivastava et al.'s Moving MNIST), whether from the preset or spelled out.
VIDEO = {"image_shape": (64, 64), "glyph_shape": (28, 28), "min_glyphs": 2, "max_glyphs": 2, "n_frames": FRAMES,
         "bounce_patches": True}


def video_spec(n: int, *, speed: float, masks: bool = False, seed: int = 0, shard_size: int | None = None) -> Any:
    """Moving MNIST, 64x64, 20 frames, two 28x28 digits (EMNIST's) bouncing at ``speed``: the preset
    ``glyphforge.moving_mnist`` where the tree has it (its fields checked against `VIDEO`), else the spec's fields.
    ``shard_size`` None: the preset's."""
    import glyphforge as gf

    common = {"glyphs": "emnist", "characters": DIGITS, "patch_speed": speed, "seed": seed,
              **({"masks": True} if masks else {}), **({"shard_size": shard_size} if shard_size else {})}
    if not hasattr(gf, "moving_mnist"):
        return gf.ScatteredGlyphs(n, max_overlap=1.0, **VIDEO, **common)
    spec = gf.moving_mnist(n, **common)
    differ = {name: getattr(spec, name, None) for name, value in VIDEO.items() if getattr(spec, name, None) != value}
    if differ:
        raise SystemExit(f"glyphforge.moving_mnist differs from the benchmark's video spec {VIDEO}: {differ}")
    return spec


def missing(kind: str) -> str | None:
    """Why glyphforge cannot make ``kind`` ("static", "video", "...+masks") here yet (None: it can)."""
    import dataclasses
    import importlib.util

    import glyphforge as gf

    if kind.startswith("video") and "n_frames" not in {f.name for f in dataclasses.fields(gf.ScatteredGlyphs)}:
        return "no n_frames field on the scene spec in this tree (the scene-family core is not merged)"
    if kind.startswith("video") and importlib.util.find_spec("glyphforge.scenes.motion") is None:
        return "no glyphforge.scenes.motion in this tree (the motion part is not merged)"
    if kind.endswith("masks") and "masks" not in {f.name for f in dataclasses.fields(gf.ScatteredGlyphs)}:
        return "no masks field on the scene specs in this tree (the scene-family core is not merged)"
    return None


def glyph_pool(data_dir: Path, characters: str | None, shape: tuple[int, int]) -> Any:
    """The glyph images glyphforge draws from for these glyphs at ``shape`` (also handed to dps)."""
    import glyphforge as gf

    spec = gf.ScatteredGlyphs(1, glyphs="emnist", characters=characters, glyph_shape=shape, image_shape=(64, 64))
    spec.prepare(data_dir)  # the glyphs at ``shape`` (a cached variant)
    return spec.glyph_pool(data_dir)


def dps_for(checkout: Path, data_dir: Path, kind: str, speed: float) -> DpsReference:
    """dps's ``EmnistObjectDetectionDataset`` on the spec ``kind`` ("static" or "video")."""
    if kind == "static":
        pool = glyph_pool(data_dir, None, (14, 14))
        params = dict(image_shape=(48, 48), min_chars=1, max_chars=3, patch_shape=(14, 14),
                      max_overlap=round(0.2 * 14 * 14))
    else:
        pool = glyph_pool(data_dir, DIGITS, (28, 28))
        params = dict(image_shape=(64, 64), min_chars=2, max_chars=2, patch_shape=(28, 28), max_overlap=None,
                      n_frames=FRAMES, patch_speed=speed, bounce_patches=True)
    labels = np.repeat(np.arange(len(pool.class_names)), pool.counts)
    return DpsReference(checkout, pool.images, labels, pool.class_names, colours="white", **params)


def prepare_glyphs(data_dir: Path | None, scratch: Path) -> tuple[Path, str]:
    """A data dir with EMNIST byclass (``--data-dir``'s, or synthetic ones prepared in ``scratch``)."""
    from bench_scenes import prepare_glyphs as prepare

    return prepare(data_dir, scratch)


# -- measuring ------------------------------------------------------------------------------
def load() -> str:
    return "load " + "/".join(f"{value:.1f}" for value in os.getloadavg())


def best_rate(make: Any, n: int, rounds: int) -> tuple[float, float]:
    """Best examples/s of ``rounds`` calls of ``make()`` making ``n``: by the wall clock and per CPU second."""
    wall = cpu = float("inf")
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        make()
        wall, cpu = min(wall, time.perf_counter() - started), min(cpu, time.process_time() - started_cpu)
    return n / wall, n / cpu


def shards_maker(spec: Any, data_dir: Path) -> Any:
    """A call making every shard of ``spec`` with ``make_shard`` in this process (arrays dropped)."""
    from glyphforge.builds.making.shards import count_shards, shard_bounds, shard_rng

    def make() -> None:
        for index in range(count_shards(spec.n_examples, spec.shard_size)):
            start, stop = shard_bounds(index, spec.n_examples, spec.shard_size)
            spec.make_shard(index, shard_rng(spec.seed, index), stop - start, data_dir=data_dir)

    return make


def warm(spec: Any, data_dir: Path) -> None:
    """Prepare ``spec``'s sources and load (or compile) its kernels, untimed."""
    spec.prepare(data_dir)
    spec.make_shard(0, np.random.default_rng(1), 4, data_dir=data_dir)


def part_ratio(args: argparse.Namespace, data_dir: Path) -> list[str]:
    rows = []
    for kind, n_gf, n_dps in (("static", args.scenes, args.dps_scenes), ("video", args.videos, args.dps_videos)):
        dps = dps_for(args.dps, data_dir, kind, args.speed)
        dps.make(10)  # warm: imports, numpy's first calls
        dps_wall, dps_cpu = best_rate(functools.partial(dps.make, n_dps), n_dps, args.rounds)
        print(f"  {kind}: dps's loop {dps_wall:,.1f} ex/s ({dps_cpu:,.1f} per CPU s), {n_dps} examples; {load()}")
        why = "--dps-only" if args.dps_only else missing(kind)
        if why:
            rows.append(f"{kind}: dps {dps_wall:,.1f} ex/s (CPU {dps_cpu:,.1f}); glyphforge not run: {why}")
            continue
        spec = static_spec(n_gf) if kind == "static" else \
            video_spec(n_gf, speed=args.speed, shard_size=args.video_shard_size)
        warm(spec, data_dir)
        gf_wall, gf_cpu = best_rate(shards_maker(spec, data_dir), n_gf, args.rounds)
        print(f"  {kind}: glyphforge make_shard {gf_wall:,.0f} ex/s ({gf_cpu:,.0f} per CPU s); {load()}")
        ratio, ratio_cpu = gf_wall / dps_wall, gf_cpu / dps_cpu
        rows.append(f"{kind}: glyphforge {gf_wall:,.0f} ex/s, dps {dps_wall:,.1f} ex/s: {ratio:,.0f}x "
                    f"(per CPU s {ratio_cpu:,.0f}x) -> goal >= 50x per core {'met' if ratio_cpu >= 50 else 'NOT met'}")
    return rows


def fresh_seed() -> int:
    """A seed no earlier run used (so a timed build never meets its own entry left by an interrupted run)."""
    return int.from_bytes(os.urandom(4), "little")


def timed_build(spec: Any, session: Any, data_dir: Path) -> float:
    """Wall seconds of an uncached build of ``spec`` (of a `fresh_seed`) into ``data_dir``, its entry removed after."""
    import glyphforge as gf
    from glyphforge import config
    from glyphforge.cache.store import CacheStore

    started = time.perf_counter()
    ds = gf.build(spec, session=session, data_dir=data_dir, progress=False)
    seconds = time.perf_counter() - started
    CacheStore(config.cache_dir(data_dir)).rm(ds.key)
    return seconds


def part_mmnist(args: argparse.Namespace, data_dir: Path, session: Any) -> list[str]:
    if missing("video"):
        return [f"Moving MNIST: not measured: {missing('video')}"]
    def make(n: int) -> Any:
        return video_spec(n, speed=args.speed, seed=fresh_seed(), shard_size=args.video_shard_size)

    spec = make(args.mmnist_videos)
    warm(spec, data_dir)
    timed_build(make(2 * spec.shard_size), session, data_dir)  # warm-up: each worker's kernels and first memory
    best = min(timed_build(make(spec.n_examples), session, data_dir) for _ in range(args.rounds))
    frames = spec.n_examples * FRAMES / best
    shards = min(args.cpu_shards, -(-spec.n_examples // spec.shard_size))
    work = min(shard_task_cpu(spec, data_dir, shards) for _ in range(args.rounds))
    per_cpu = shards * spec.shard_size * FRAMES / work
    print(f"  Moving MNIST {spec.n_examples:,} videos (shards of {spec.shard_size}) in {best:.2f} s on processes:2; "
          f"the build work {per_cpu:,.0f} frames per CPU s; {load()}")
    return [f"Moving MNIST on processes:2 (shards of {spec.shard_size}): {frames:,.0f} frames/s "
            f"({spec.n_examples / best:,.0f} videos/s); the shards' build work {per_cpu:,.0f} frames per CPU s "
            f"(2 idle cores: {2 * per_cpu:,.0f}) -> goal >= 50,000 {'met' if frames >= 50_000 else 'NOT met'}"]


def part_masks(args: argparse.Namespace, data_dir: Path, session: Any) -> list[str]:
    rows = []
    for kind, n in (("static", args.build_scenes), ("video", args.mmnist_videos)):
        if missing(kind + "+masks"):
            rows.append(f"{kind} masks / none: not measured: {missing(kind + '+masks')}")
            continue

        def make(masks: bool, seed: int = 0, n: int = n, kind: str = kind) -> Any:
            return static_spec(n, masks=masks, seed=seed) if kind == "static" else \
                video_spec(n, speed=args.speed, masks=masks, seed=seed, shard_size=args.video_shard_size)

        for masks in (False, True):
            warm(make(masks), data_dir)
            timed_build(make(masks, seed=fresh_seed(), n=2 * make(masks).shard_size), session, data_dir)
        builds: dict[bool, list[float]] = {False: [], True: []}
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            seed = fresh_seed()
            for masks in (False, True):  # alternated: drift in the machine's load hits both alike
                builds[masks].append(timed_build(make(masks, seed), session, data_dir))
                cpu[masks].append(shard_task_cpu(make(masks, seed), data_dir, args.cpu_shards))
        ratio, ratio_cpu = min(builds[True]) / min(builds[False]), min(cpu[True]) / min(cpu[False])
        print(f"  {kind}: build {min(builds[False]):.2f} s, with masks {min(builds[True]):.2f} s; {args.cpu_shards} "
              f"shards' build work {min(cpu[False]):.2f} / {min(cpu[True]):.2f} CPU s; {load()}")
        verdict = "met" if ratio <= 1.3 else "NOT met"
        rows.append(f"{kind} ({n:,}) masks / none: build {ratio:.2f}x (rounds {_ratios(builds)}); build work per "
                    f"CPU s {ratio_cpu:.2f}x (rounds {_ratios(cpu)}) -> goal <= 1.3x {verdict}")
    return rows


def shard_task_cpu(spec: Any, data_dir: Path, shards: int) -> float:
    """CPU seconds of the builder's work on the first ``shards`` shards in this process (`ShardTask`: make,
    write, hash, record), the build's work without the session and the other jobs on the machine."""
    from glyphforge.builds.making.shards import ShardTask

    with tempfile.TemporaryDirectory(prefix="bench-shards-") as work_dir:
        task = ShardTask(spec, work_dir, str(data_dir))
        started = time.process_time()
        for index in range(shards):
            task(index)
        return time.process_time() - started


def _ratios(times: dict[bool, list[float]]) -> str:
    pairs = zip(times[True], times[False], strict=True)
    return ", ".join(f"{with_masks / without:.2f}" for with_masks, without in pairs)


def part_read(args: argparse.Namespace, data_dir: Path) -> list[str]:
    import glyphforge as gf

    makers = {"static": lambda: static_spec(args.read_scenes),
              "static+masks": lambda: static_spec(args.read_scenes, masks=True),
              "video+masks": lambda: video_spec(args.read_videos, speed=args.speed, masks=True,
                                                shard_size=args.video_shard_size)}
    kinds = {kind: make() for kind, make in makers.items() if not missing(kind)}
    for spec in kinds.values():
        gf.build(spec, session="processes:2", data_dir=data_dir, progress=False)  # once; cached after
    results: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            results[kind].append(_child("read", kind, str(data_dir), str(args.read_scenes), str(args.read_videos),
                                        str(args.speed), str(args.video_shard_size or 0)))
    rows = [f"read {kind}: not measured: {missing(kind)}" for kind in makers if kind not in kinds]
    today = max(r["mb_s"] for r in results["static"])
    today_cpu = max(r["cpu_mb_s"] for r in results["static"])
    for kind, runs in results.items():
        best = max(runs, key=lambda r: r["mb_s"])
        ratio = best["mb_s"] / today
        verdict = "" if kind == "static" else " -> " + (
            "holds" if ratio >= 1 else "holds within 10% (this machine's noise)" if ratio >= 0.9 else "LOWER")
        rows.append(f"read {kind}: {best['ex_s']:,.0f} ex/s, {best['mb_s']:,.0f} MB/s ({best['row_kb']:.1f} KB a "
                    f"row; first epoch {best['first_mb_s']:,.0f} MB/s), {best['rss_mb']:.0f} MB; "
                    f"{ratio:.2f}x today's MB/s{verdict}; per CPU s {max(r['cpu_mb_s'] for r in runs):,.0f} MB, "
                    f"{max(r['cpu_mb_s'] for r in runs) / today_cpu:.2f}x today's")
    return rows


def _child(*argv: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise SystemExit(f"the child {argv[:2]} failed:\n{done.stderr}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def child_read(kind: str, data_dir: str, scenes: str, videos: str, speed: str, video_shard_size: str) -> dict:
    """Three shuffled epochs of ``ds.stream(256)`` over the built ``kind`` (a cache hit), in this fresh process."""
    import glyphforge as gf

    spec = {"static": lambda: static_spec(int(scenes)), "static+masks": lambda: static_spec(int(scenes), masks=True),
            "video+masks": lambda: video_spec(int(videos), speed=float(speed), masks=True,
                                              shard_size=int(video_shard_size) or None)}[kind]()
    ds = gf.build(spec, data_dir=data_dir, progress=False)
    stream = ds.stream(256, shuffle=True, seed=0)
    rates, cpu_rates, row_bytes = [], [], 0
    for _ in range(3):
        count, started, started_cpu = 0, time.perf_counter(), time.process_time()
        for images, targets in stream:
            count += len(images)
            row_bytes = row_bytes or (images.nbytes + sum(a.nbytes for a in targets.values())) // len(images)
        rates.append(count / (time.perf_counter() - started))
        cpu_rates.append(count / (time.process_time() - started_cpu))
    with open("/proc/self/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))
    best = max(rates[1:])
    return {"ex_s": best, "mb_s": best * row_bytes / 1e6, "first_mb_s": rates[0] * row_bytes / 1e6,
            "cpu_mb_s": max(cpu_rates[1:]) * row_bytes / 1e6, "row_kb": row_bytes / 1e3, "rss_mb": rss}


def profile(args: argparse.Namespace, data_dir: Path) -> None:
    """cProfile of ``make_shard`` over the spec ``args.profile`` (static, static+masks, video, video+masks)."""
    kind, _, masks = args.profile.partition("+")
    spec = static_spec(args.scenes, masks=bool(masks)) if kind == "static" else \
        video_spec(args.videos, speed=args.speed, masks=bool(masks), shard_size=args.video_shard_size)
    warm(spec, data_dir)
    profiler = cProfile.Profile()
    profiler.runcall(shards_maker(spec, data_dir))
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dps", type=Path, help="a git checkout of e2crawfo/dps (made by you)")
    parser.add_argument("--data-dir", type=Path, default=None, help="a data dir with EMNIST byclass prepared")
    parser.add_argument("--parts", default="ratio,mmnist,masks,read")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--video-shard-size", type=int, default=None,
                        help="videos per shard (default: the preset's shard_size)")
    parser.add_argument("--speed", type=float, default=2.5, help="pixels per frame")
    parser.add_argument("--scenes", type=int, default=20_000, help="static scenes glyphforge makes per round")
    parser.add_argument("--videos", type=int, default=2_000, help="videos glyphforge makes per round (ratio)")
    parser.add_argument("--dps-scenes", type=int, default=1_000)
    parser.add_argument("--dps-videos", type=int, default=100)
    parser.add_argument("--mmnist-videos", type=int, default=5_000, help="videos a processes:2 build makes")
    parser.add_argument("--cpu-shards", type=int, default=5, help="shards of each spec whose build work is timed")
    parser.add_argument("--build-scenes", type=int, default=100_000, help="static scenes a processes:2 build makes")
    parser.add_argument("--read-scenes", type=int, default=100_000)
    parser.add_argument("--read-videos", type=int, default=2_000)
    parser.add_argument("--dps-only", action="store_true", help="measure dps's loop alone")
    parser.add_argument("--profile", default=None,
                        help="cProfile one spec's make_shard instead: static, video, static+masks or video+masks")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the glyphs and read datasets here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps({"read": child_read}[args.child[0]](*args.child[1:])))
        return
    if args.dps is None and not args.profile:
        parser.error("--dps PATH (a git checkout of e2crawfo/dps) is needed")
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="bench-scene-family-"))
    scratch.mkdir(parents=True, exist_ok=True)
    glyph_dir = scratch / "glyphs"
    glyph_dir.mkdir(exist_ok=True)
    try:
        data_dir, source = prepare_glyphs(args.data_dir, glyph_dir) if args.data_dir or not \
            (glyph_dir / "cache").is_dir() else (glyph_dir, "synthetic EMNIST-shaped glyphs (kept in --workdir)")
        print(f"glyphs: {source}; 1 core per process; {load()}")
        if args.profile:
            profile(args, data_dir)
            return
        parts = args.parts.split(",") if not args.dps_only else ["ratio"]
        rows = part_ratio(args, data_dir) if "ratio" in parts else []
        if {"mmnist", "masks"} & set(parts):
            from glyphforge.session import open_session

            with open_session("processes", n_workers=2) as session:
                rows += part_mmnist(args, data_dir, session) if "mmnist" in parts else []
                rows += part_masks(args, data_dir, session) if "masks" in parts else []
        rows += part_read(args, data_dir) if "read" in parts else []
        print("\n" + "\n".join(rows) + f"\n({load()})")
    finally:
        if args.workdir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":  # required: the processes backend spawns workers that import this file
    main()
