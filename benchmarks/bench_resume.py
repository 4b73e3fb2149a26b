"""Resuming a stream mid-epoch: what reading the rest costs against the whole epoch.

    python benchmarks/bench_resume.py --glyphs font --examples 100000
    python benchmarks/bench_resume.py --at 0.9 --repeats 3 --workdir /tmp/bench-read

Uses the scenes ``bench_read.py`` builds (once, cached in ``--workdir``; same options).
Each measurement runs in a fresh process: a whole shuffled epoch through
``ds.stream(256, seed=0)``, then, from ``stream.state_after(steps)`` at ``--at`` of the
epoch (90% by default), opening ``ds.stream(256, seed=0, resume=state)`` and reading the
rest of the epoch (the time includes the first batch's window decode). The goal: resuming
at 90% costs at most 15% of the epoch's time (the consumed windows are skipped, not read).

Both children import the stream's code (``glyphforge.builds.stream.stream`` and ``numpy.random``,
which the first ``ds.stream`` call would import lazily) before their clock starts, as a
training job that resumes has imported its code long before: the goal is about reading
the rest of the epoch. The imports are timed apart, in each child alike, and the ratio is
also printed with them in the clock (a fresh process's first epoch).
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import open_dataset, peak_mb, prepare  # noqa: E402

GOAL = 0.15
BATCH = 256
#: The code the first ``ds.stream`` call imports, imported before the clock in both children.
STREAM_CODE = ("numpy.random", "glyphforge.builds.stream.stream")


def child(data_dir: str, at: float) -> dict:
    """Time the whole epoch (``at`` 0) or the rest of it resumed at ``at`` of its batches (imports timed apart)."""
    ds = open_dataset(data_dir)
    started = time.perf_counter()
    for module in STREAM_CODE:
        importlib.import_module(module)
    imports = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    stream = ds.stream(BATCH, seed=0)
    if at:
        stream = ds.stream(BATCH, seed=0, resume=stream.state_after(int(at * stream.batches_per_rank)))
    count = sum(len(images) for images, _ in stream)
    return {"examples": count, "seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu,
            "imports": imports, "mb": peak_mb()}


def run(data_dir: str, at: float) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", data_dir, str(at)], capture_output=True, text=True,
                          check=True)
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--glyphs", choices=["emnist", "font"], default="font")
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--backgrounds", choices=["none", "hard"], default="none")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-read")
    parser.add_argument("--emnist-workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-emnist")
    parser.add_argument("--at", type=float, default=0.9, help="where to resume, as a part of the epoch's batches")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], float(args.child[1]))))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    data_dir = str(prepare(args))
    pairs = [(run(data_dir, 0.0), run(data_dir, args.at)) for _ in range(args.repeats)]  # alternated: same load
    report([pair[0] for pair in pairs], [pair[1] for pair in pairs], args.at)


def median(results: list[dict], *keys: str) -> float:
    """The median over ``results`` of the sum of their ``keys``."""
    return statistics.median(sum(result[key] for key in keys) for result in results)


def report(whole: list[dict], rest: list[dict], at: float) -> None:
    """Print the medians of the whole epochs and of the rests resumed at ``at``, and their ratios."""
    epoch, resumed = median(whole, "seconds"), median(rest, "seconds")
    ratio = resumed / epoch
    print(f"\nwhole epoch: {whole[0]['examples']:,} examples in {epoch:.3f} s (median of {len(whole)}), "
          f"{whole[0]['examples'] / epoch:,.0f} ex/s, peak {max(r['mb'] for r in whole):.0f} MB")
    print(f"resumed at {at:.0%}: {rest[0]['examples']:,} examples in {resumed:.3f} s, "
          f"peak {max(r['mb'] for r in rest):.0f} MB")
    print(f"resume / epoch: {ratio:.1%} (goal <= {GOAL:.0%}, ideal {1 - at:.0%}) "
          f"{'met' if ratio <= GOAL else 'NOT MET'} (the stream's code imported before the clock)")
    print(f"in CPU time (less hostage to other jobs on the machine): {median(rest, 'cpu') / median(whole, 'cpu'):.1%}")
    cold_epoch, cold_resumed = median(whole, "seconds", "imports"), median(rest, "seconds", "imports")
    print(f"with the imports in the clock ({median(whole + rest, 'imports') * 1000:.1f} ms): "
          f"{cold_resumed:.3f} s / {cold_epoch:.3f} s = {cold_resumed / cold_epoch:.1%}")


if __name__ == "__main__":
    main()
