"""Cold start: each entry point in a fresh process with an empty numba cache, then warm.

    python benchmarks/bench_cold_start.py [--workdir DIR]

Every command runs in a new Python process twice with the same fresh ``NUMBA_CACHE_DIR``:
first cold (nothing compiled), then warm (the kernels load from that cache). The
difference is what compiling costs the command. Each run also gets a fresh data dir, so
both runs do the same conversion or build work. Then ``glyphforge warmup``'s own
per-kernel seconds, cold. Goals (2 cores): every command at most 3 s of compile on top of
its warm time, ``warmup`` at most 6 s in all, and a ``processes:2`` build compiling once
(``tests/cli/test_warmup.py`` proves the last with numba's cache counters). ``prepare-data``
ends with a warmup of every kernel; the ``--no-warmup`` rows time its conversion alone.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
BIN = Path(sys.executable).parent

RESIZE = ("import numpy as np; from glyphforge import resize; "
          "resize(np.zeros({shape}, np.{dtype}), (14, 14), method={method!r})")
EMNIST = [str(BIN / "prepare-data"), "emnist", "--emnist-archive", "{archive}", "--no-verify", "--shape", "14x14", "-q"]
OMNIGLOT = [str(BIN / "prepare-data"), "omniglot", "--omniglot-sets", "small1", "small2", "--shape", "28x28",
            "--mirror", SHARED_DATA.as_uri(), "--offline", "-q"]
EMNIST_NAME = "prepare-data emnist (synthetic) --shape 14x14"
OMNIGLOT_NAME = "prepare-data omniglot small1 small2 --shape 28x28"
COMMANDS: dict[str, list[str]] = {
    "resize uint8 box (also bilinear, lanczos)": [sys.executable, "-c", RESIZE.format(shape=(64, 28, 28), dtype="uint8",
                                                                                      method="box")],
    "resize uint8 area": [sys.executable, "-c", RESIZE.format(shape=(64, 28, 28), dtype="uint8", method="area")],
    "resize float32 box": [sys.executable, "-c", RESIZE.format(shape=(64, 28, 28), dtype="float32", method="box")],
    "resize 8,192 uint8 images (threads)": [sys.executable, "-c", RESIZE.format(shape=(8192, 28, 28), dtype="uint8",
                                                                                method="box")],
    EMNIST_NAME: EMNIST,
    "prepare-data emnist ... --no-warmup (conversion alone)": [*EMNIST, "--no-warmup"],
    OMNIGLOT_NAME: OMNIGLOT,
    "prepare-data omniglot ... --no-warmup (conversion alone)": [*OMNIGLOT, "--no-warmup"],
    "build scenes --glyphs font --n-examples 200": [str(BIN / "glyphforge"), "build", "scenes", "--glyphs", "font",
                                                    "--n-examples", "200", "-q"],
    "build 2,000 font scenes on processes:2": [str(BIN / "glyphforge"), "build", "scenes", "--glyphs", "font",
                                               "--n-examples", "2000", "--session", "processes:2", "-q"],
    "glyphforge warmup": [str(BIN / "glyphforge"), "warmup"],
}


def goal_check(name: str, compile_seconds: float) -> str:
    """The goal of one command: 3 s of compile, 6 s for warmup; prepare-data's default is conversion + warmup."""
    if name in (EMNIST_NAME, OMNIGLOT_NAME):
        return "conversion (--no-warmup row) + warmup"
    goal = 6.0 if name == "glyphforge warmup" else 3.0
    return f"<= {goal:.0f} s: {'met' if compile_seconds <= goal else 'NOT met'}"


def timed_run(command: list[str], cache: Path, data: Path) -> tuple[float, str]:
    data.mkdir(parents=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "GLYPHFORGE_DATA_DIR": str(data)}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{done.stderr}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from support.synthetic_emnist import write_synthetic_emnist

    with tempfile.TemporaryDirectory(prefix="bench-cold-", dir=args.workdir) as scratch:
        root = Path(scratch)
        archive = write_synthetic_emnist(root / "gzip.zip").path
        print(f"{'command (fresh process each)':56s} {'cold s':>7s} {'warm s':>7s} {'compile s':>9s}  goal")
        warmup_output = ""
        for number, (name, command) in enumerate(COMMANDS.items()):
            command = [part.replace("{archive}", str(archive)) for part in command]
            cache = root / f"numba-{number}"
            cold, output = timed_run(command, cache, root / f"data-{number}-cold")
            warm, _ = timed_run(command, cache, root / f"data-{number}-warm")
            if name == "glyphforge warmup":
                warmup_output = output
            print(f"{name:56s} {cold:7.2f} {warm:7.2f} {cold - warm:9.2f}  {goal_check(name, cold - warm)}")
        print("\nglyphforge warmup, cold (per kernel; goal: <= 6 s in all):")
        print(warmup_output)


if __name__ == "__main__":
    main()
