"""Benchmark the parallel builder: speed-up, efficiency and per-shard overhead per backend.

    python benchmarks/bench_build.py                       # 200,000 scenes + sleep simulation
    python benchmarks/bench_build.py --spec cpu            # the FFT-noise stand-in spec
    python benchmarks/bench_build.py --spec pkg.mod:make   # your spec: make(n_examples, shard_size, seed)
    python benchmarks/bench_build.py --skip-simulation --examples 10000

Part 1 builds a CPU-bound spec (by default `ScatteredGlyphs` with font glyphs on flat
colours, which needs no data: 48x48 scenes, 1-3 glyphs) with 1, 2 and all cores, in process, on the processes
backend and on a Dask LocalCluster. Sessions are opened and warmed up before timing
(worker start-up is not counted). The per-shard overhead is reported twice: against
the bare compute of every ``make_shard`` run serially here (everything: session,
builder, cores slowing each other down), and against a bare map of the same compute on
the same session (the builder alone: writing, hashing, concatenating, committing).

Part 2 simulates machines this one does not have: shards whose work is a fixed sleep,
16 rounds of them per worker, on 2, 32 and 128 Dask workers, against the ideal makespan
16 x sleep. 2 and 32 workers are single-threaded worker processes; 128 worker processes
do not fit in a small machine's memory, so 128 is 32 processes x 4 threads (a sleep
releases the GIL). All of them share this machine's cores for the per-shard work
(sending tasks, writing and hashing shard files) that real machines would do in parallel.
"""
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # one core per worker: no hidden thread pools

import argparse  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from glyphforge.builds.making.builder import build  # noqa: E402
from glyphforge.builds.making.shards import (  # noqa: E402
    ShardTask,
    call_with_data_dir,
    count_shards,
    shard_bounds,
    shard_rng,
)
from glyphforge.session import Session, open_session  # noqa: E402


@dataclass
class CpuSpec:
    """CPU-bound stand-in for a scene generator: FFT-filtered noise images, ~0.5 ms each."""

    n_examples: int = 20_000
    shard_size: int = 1_000
    seed: int = 0
    kind: str = "bench-cpu"

    def params(self) -> dict[str, Any]:
        return {"version": 1}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        noise = rng.standard_normal((n, 64, 64), dtype=np.float32)
        kernel = np.exp(-np.add.outer(np.arange(64) ** 2, np.arange(33) ** 2) / 40.0)
        spectrum = np.fft.rfft2(noise) * kernel
        for _ in range(2):
            spectrum = np.fft.rfft2(np.tanh(np.fft.irfft2(spectrum, s=(64, 64)))) * kernel
        images = np.fft.irfft2(spectrum, s=(64, 64))[:, ::2, ::2]
        scaled = (images - images.min()) / (np.ptp(images) + 1e-9) * 255
        return {"images": scaled.astype(np.uint8), "labels": rng.integers(0, 10, n).astype(np.int16)}


@dataclass
class SleepSpec:
    """One example per shard; making it is a fixed sleep (compute on a machine we lack)."""

    n_examples: int
    sleep: float
    shard_size: int = 1
    seed: int = 0
    kind: str = "bench-sleep"

    def params(self) -> dict[str, Any]:
        return {"sleep": self.sleep}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        time.sleep(self.sleep)
        return {"x": rng.integers(0, 255, size=(n, 8), dtype=np.uint8)}


def font_scenes(n_examples: int, shard_size: int, seed: int) -> Any:
    """The scenes spec with glyphs rendered from Pillow's font on random flat colours (no data needed)."""
    from glyphforge.scenes.spec import ScatteredGlyphs

    return ScatteredGlyphs(n_examples, glyphs="font", background_colours=["navy", "olive", "grey", "black"],
                           colours=["white", "yellow"], shard_size=shard_size, seed=seed)


def load_spec_factory(text: str) -> Callable[[int, int, int], Any]:
    """Return ``make(n_examples, shard_size, seed) -> spec``: ``scenes``, ``cpu`` or ``module:callable``."""
    if text in ("scenes", "cpu"):
        return font_scenes if text == "scenes" else CpuSpec
    module, _, name = text.partition(":")
    if not name:
        raise SystemExit(f"--spec {text!r}: write it as module:callable, e.g. mypkg.specs:make_spec")
    return getattr(importlib.import_module(module), name)


def compute_seconds(spec: Any, repeat: int) -> float:
    """Best-of-``repeat`` seconds to run every make_shard serially here, with no builder around it."""
    spec.make_shard(0, shard_rng(spec.seed, 0), min(spec.shard_size, spec.n_examples))  # warm-up
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for index in range(count_shards(spec.n_examples, spec.shard_size)):
            start, stop = shard_bounds(index, spec.n_examples, spec.shard_size)
            spec.make_shard(index, shard_rng(spec.seed, index), stop - start)
        best = min(best, time.perf_counter() - started)
    return best


def interleaved_shard_cost(spec: Any, scratch: Path, rounds: int = 4, shards: int = 3) -> tuple[float, float]:
    """Median ms of ``make_shard`` alone and of the builder's `ShardTask`, alternated so drift hits both alike."""
    data_dir = tempfile.mkdtemp(dir=scratch)
    if callable(getattr(spec, "prepare", None)):
        spec.prepare(data_dir)
    task = ShardTask(spec, tempfile.mkdtemp(dir=scratch), data_dir)
    bare, full = [], []
    for _ in range(rounds):
        for index in range(shards):
            start, stop = shard_bounds(index, spec.n_examples, spec.shard_size)
            started = time.perf_counter()
            call_with_data_dir(spec.make_shard, index, shard_rng(spec.seed, index), stop - start, data_dir=data_dir)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            task(index)
            full.append(time.perf_counter() - started)
    return statistics.median(bare) * 1000, statistics.median(full) * 1000


def timed_build(spec: Any, session: Session | str, scratch: Path, repeat: int = 1) -> float:
    """Best-of-``repeat`` wall seconds of an uncached build (a fresh data dir each time)."""
    best = float("inf")
    for _ in range(repeat):
        data_dir = Path(tempfile.mkdtemp(dir=scratch))
        started = time.perf_counter()
        build(spec, session=session, data_dir=data_dir, progress=False)
        best = min(best, time.perf_counter() - started)
        shutil.rmtree(data_dir)
    return best


def open_bench_session(backend: str, workers: int, **options: Any) -> Session:
    """Open ``backend`` with ``workers`` workers; Dask's shutdown chatter silenced."""
    if backend == "local":
        return open_session("local")
    if backend == "dask":
        options["silence_logs"] = logging.CRITICAL
    return open_session(backend, n_workers=workers, **options)


@dataclass
class BareShard:
    """Run one ``make_shard`` and drop its arrays: a shard's compute without the builder."""

    spec: Any

    def __call__(self, index: int) -> None:
        start, stop = shard_bounds(index, self.spec.n_examples, self.spec.shard_size)
        self.spec.make_shard(index, shard_rng(self.spec.seed, index), stop - start)


def part1(make_spec: Callable[[int, int, int], Any], n_examples: int, shard_size: int, scratch: Path,
          repeat: int) -> None:
    """Build ``make_spec(n_examples, shard_size, 0)`` on each backend with 1, 2 and all cores.

    Each session is warmed up first (one shard per worker of another seed), then runs a
    bare map of the shards' compute, then the build. Overhead per shard, as a share of
    one shard's compute time: the build against the bare compute here (everything: the
    session, the builder and cores slowing each other down), and against the bare map
    on the same session (the builder alone: writing, hashing, concatenating, committing).
    """
    spec = make_spec(n_examples, shard_size, 0)
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    compute = compute_seconds(spec, repeat)
    per_shard = compute / n_shards
    print(f"spec {type(spec).__name__}: {spec.n_examples} examples, {n_shards} shards of {spec.shard_size}; "
          f"bare compute {compute:.2f} s ({per_shard * 1000:.0f} ms per shard)")
    bare_ms, task_ms = interleaved_shard_cost(spec, scratch)
    print(f"one shard here, interleaved (medians of 12): make_shard {bare_ms:.1f} ms, the builder's ShardTask "
          f"(make, write, hash, record) {task_ms:.1f} ms: {task_ms - bare_ms:+.1f} ms ({task_ms / bare_ms - 1:+.1%})\n")
    counts = sorted({1, 2, os.cpu_count() or 1})
    runs = [("local", 1)] + [(backend, n) for backend in ("processes", "dask") for n in counts]
    print(f"{'backend':<10} {'workers':>7} {'seconds':>8} {'examples/s':>11} {'speed-up':>9} {'vs local':>9} "
          f"{'efficiency':>10} {'overhead/shard vs compute':>26} {'vs bare map':>20}")
    baseline: dict[str, float] = {}
    for backend, workers in runs:
        with open_bench_session(backend, workers) as session:
            timed_build(make_spec(workers * shard_size, shard_size, 1), session, scratch)  # warm-up
            bare = min(_timed_map(session, BareShard(spec), n_shards) for _ in range(repeat))
            wall = timed_build(spec, session, scratch, repeat)
        baseline.setdefault(backend, wall)
        speedup = baseline[backend] / wall
        overhead = (wall * workers - compute) / n_shards
        builder = (wall - bare) * workers / n_shards
        print(f"{backend:<10} {workers:>7} {wall:>8.2f} {spec.n_examples / wall:>11,.0f} {speedup:>8.2f}x "
              f"{baseline['local'] / wall:>8.2f}x {speedup / workers:>9.0%} "
              f"{overhead * 1000:>15.1f} ms {overhead / per_shard:>7.1%} "
              f"{builder * 1000:>9.1f} ms {builder / per_shard:>7.1%}")
    print()


def _timed_map(session: Session, fn: Callable[[int], Any], n: int) -> float:
    started = time.perf_counter()
    for _ in session.map(fn, range(n)):
        pass
    return time.perf_counter() - started


def _nap(seconds: float, index: int) -> None:
    time.sleep(seconds)


def part2(sleep: float, layouts: list[tuple[int, int]], rounds: int, scratch: Path) -> None:
    """Sleep shards, ``rounds`` per worker thread, for each ``(processes, threads)`` layout.

    Each layout first runs a plain ``Session.map`` of the same sleeps (the cost of Dask
    and the session alone), then the build (adding shard writing, hashing, concatenation).
    """
    ideal = rounds * sleep
    print(f"simulation: {rounds} rounds of {sleep:g} s sleep shards per worker; ideal makespan {ideal:.2f} s")
    print(f"{'workers':>7} {'procs x threads':>15} {'shards':>6} {'map s':>7} {'map overhead':>12} "
          f"{'build s':>8} {'build overhead':>14} {'start-up':>8}")
    for processes, threads in layouts:
        workers = processes * threads
        started = time.perf_counter()
        with open_bench_session("dask", processes, threads_per_worker=threads) as session:
            startup = time.perf_counter() - started
            timed_build(SleepSpec(n_examples=2 * workers, sleep=0.0, seed=1), session, scratch)  # warm-up
            plain = _timed_map(session, functools.partial(_nap, sleep), rounds * workers)
            wall = timed_build(SleepSpec(n_examples=rounds * workers, sleep=sleep), session, scratch)
        print(f"{workers:>7} {f'{processes} x {threads}':>15} {rounds * workers:>6} {plain:>7.2f} "
              f"{plain / ideal - 1:>12.1%} {wall:>8.2f} {wall / ideal - 1:>14.1%} {startup:>7.1f}s")


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """``"2x1,32x1,32x4"`` -> ``[(2, 1), (32, 1), (32, 4)]`` (worker processes x threads each)."""
    layouts = []
    for part in text.split(","):
        processes, _, threads = part.partition("x")
        layouts.append((int(processes), int(threads or 1)))
    return layouts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="scenes",
                        help="scenes (font glyphs), cpu (FFT noise), or module:callable making a spec from "
                             "(n_examples, shard_size, seed)")
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--shard-size", type=int, default=1_000)
    parser.add_argument("--skip-build", action="store_true", help="only the sleep simulation")
    parser.add_argument("--skip-simulation", action="store_true", help="only the CPU-bound builds")
    parser.add_argument("--repeat", type=int, default=1, help="CPU-bound runs: best of this many")
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds per simulated shard")
    parser.add_argument("--rounds", type=int, default=16, help="simulated shards per worker")
    parser.add_argument("--sim-workers", default="2x1,32x1,32x4",
                        help="worker layouts, PROCESSESxTHREADS, comma-separated")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="glyphforge-bench-"))
    try:
        if not args.skip_build:
            part1(load_spec_factory(args.spec), args.examples, args.shard_size, scratch, args.repeat)
        if not args.skip_simulation:
            part2(args.sleep, parse_layouts(args.sim_workers), args.rounds, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":  # required: the processes backend spawns workers that import this file
    main()
