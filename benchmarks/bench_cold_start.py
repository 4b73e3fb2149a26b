"""Cold start: each entry point in a fresh process with an empty numba cache, against the same warm.

    python benchmarks/bench_cold_start.py [--first-use] [--runs 2] [--workdir DIR]

Every command runs in a new Python process twice with the same fresh ``NUMBA_CACHE_DIR``:
first cold (nothing compiled), then warm (the kernels load from that cache), so
``cold - warm`` is what compiling costs the command. Each run also gets a fresh data dir,
so both runs do the same conversion or build work. ``--runs N`` repeats every pair N
times (interleaved: cold, warm, cold, warm) and prints the range.

Goals (2 cores; issue 32 "first use close to warm"): each resize method's first call
(64 uint8 images 28x28 -> 14x14; float32 beside them) at most +1.0 s over its warm call;
a 200-scene font build at most +1.5 s; ``glyphforge warmup`` cold at most 6 s in all.
Every other command keeps the older goal of at most 3 s of compile. ``--first-use`` runs
only the issue-32 rows. ``prepare-data`` ends with a warmup of every kernel; its
``--no-warmup`` rows time its conversion alone. A ``processes:2`` build compiling once is
proved by ``tests/cli/test_warmup.py`` with numba's cache counters.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
BIN = Path(sys.executable).parent

RESIZE = ("import numpy as np; from glyphforge import resize; "
          "resize(np.zeros({shape}, np.{dtype}), (14, 14), method={method!r})")
EMNIST = [str(BIN / "prepare-data"), "emnist", "--emnist-archive", "{archive}", "--no-verify", "--shape", "14x14", "-q"]
OMNIGLOT = [str(BIN / "prepare-data"), "omniglot", "--omniglot-sets", "small1", "small2", "--shape", "28x28",
            "--mirror", SHARED_DATA.as_uri(), "--offline", "-q"]


class Row(NamedTuple):
    name: str
    command: list[str]
    goal: str  # "compile": cold - warm <= seconds; "cold": the cold run <= seconds; "none": no goal of its own
    seconds: float
    first_use: bool  # a row of issue 32's goals


def _resize(method: str, dtype: str = "uint8", count: int = 64) -> list[str]:
    return [sys.executable, "-c", RESIZE.format(shape=(count, 28, 28), dtype=dtype, method=method)]


ROWS = (
    *(Row(f"resize uint8 {method}", _resize(method), "compile", 1.0, True)
      for method in ("box", "bilinear", "lanczos", "area")),
    Row("resize float32 box", _resize("box", "float32"), "compile", 1.0, True),
    Row("build scenes --glyphs font --n-examples 200", [str(BIN / "glyphforge"), "build", "scenes", "--glyphs", "font",
                                                        "--n-examples", "200", "-q"], "compile", 1.5, True),
    Row("glyphforge warmup", [str(BIN / "glyphforge"), "warmup"], "cold", 6.0, True),
    Row("resize 8,192 uint8 images (threads)", _resize("box", count=8192), "compile", 3.0, False),
    Row("prepare-data emnist (synthetic) --shape 14x14", EMNIST, "none", 0.0, False),
    Row("prepare-data emnist ... --no-warmup (conversion alone)", [*EMNIST, "--no-warmup"], "compile", 3.0, False),
    Row("prepare-data omniglot small1 small2 --shape 28x28", OMNIGLOT, "none", 0.0, False),
    Row("prepare-data omniglot ... --no-warmup (conversion alone)", [*OMNIGLOT, "--no-warmup"], "compile", 3.0, False),
    Row("build 2,000 font scenes on processes:2", [str(BIN / "glyphforge"), "build", "scenes", "--glyphs", "font",
                                                   "--n-examples", "2000", "--session", "processes:2", "-q"],
        "compile", 3.0, False),
)


def timed_run(command: list[str], cache: Path, data: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds (its processes') of ``command`` in a fresh process, numba's cache in ``cache``.

    ``data`` is a fresh data dir. CPU seconds move less than wall seconds on a busy machine.
    """
    data.mkdir(parents=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "GLYPHFORGE_DATA_DIR": str(data)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, done.stdout


def _span(values: list[float], sign: str = "") -> str:
    low, high = min(values), max(values)
    return f"{sign}{low:.2f}" if len(values) == 1 else f"{sign}{low:.2f}-{sign}{high:.2f}"


def verdict(row: Row, colds: list[float], warms: list[float], cpus: list[float]) -> str:
    """The row's figure and goal, as ``cold - warm = +X s (goal +G s): met`` (a range over runs).

    ``cpus`` are the CPU seconds of cold - warm, shown beside.
    """
    compiles = [cold - warm for cold, warm in zip(colds, warms, strict=True)]
    figure = f"cold - warm = {_span(compiles, '+')} s (CPU {_span(cpus, '+')} s)"
    if row.goal == "none":
        return f"{figure} (conversion, the --no-warmup row, + warmup)"
    measured = compiles if row.goal == "compile" else colds
    met = sum(value <= row.seconds for value in measured)
    said = "met" if met == len(measured) else "NOT met" if met == 0 else f"met in {met} of {len(measured)} runs"
    goal = f"goal +{row.seconds:.1f} s" if row.goal == "compile" else f"goal: cold <= {row.seconds:.0f} s"
    return f"{figure} ({goal}): {said}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first-use", action="store_true", help="only the rows of issue 32's goals")
    parser.add_argument("--runs", type=int, default=1, help="cold/warm pairs per row (default 1)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    rows = [row for row in ROWS if row.first_use or not args.first_use]
    load = os.getloadavg()
    print(f"{len(rows)} commands, {args.runs} cold/warm pair(s) each; load average before: "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-cold-", dir=args.workdir) as scratch:
        root = Path(scratch)
        archive = None
        if not args.first_use:
            sys.path.insert(0, str(ROOT / "tests"))
            from support.synthetic_emnist import write_synthetic_emnist

            archive = write_synthetic_emnist(root / "gzip.zip").path
        print(f"{'command (fresh process each)':56s} {'cold s':>11s} {'warm s':>11s}  figure (wall; CPU beside)")
        warmup_output = ""
        for number, row in enumerate(rows):
            command = [part.replace("{archive}", str(archive)) for part in row.command]
            colds, warms, cpus = [], [], []
            for run in range(args.runs):
                cache = root / f"numba-{number}-{run}"
                cold, cold_cpu, output = timed_run(command, cache, root / f"data-{number}-{run}-cold")
                warm, warm_cpu, _ = timed_run(command, cache, root / f"data-{number}-{run}-warm")
                colds.append(cold)
                warms.append(warm)
                cpus.append(cold_cpu - warm_cpu)
                if row.name == "glyphforge warmup":
                    warmup_output = output
            figure = verdict(row, colds, warms, cpus)
            print(f"{row.name:56s} {_span(colds):>11s} {_span(warms):>11s}  {figure}", flush=True)
        if warmup_output:
            print("\nglyphforge warmup, cold (per kernel; goal: <= 6 s in all):")
            print(warmup_output)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
