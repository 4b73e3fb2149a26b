"""Scaling a stream out: torch DataLoader workers over ``ds.stream(...)``, and one rank of many.

    python benchmarks/bench_scale_out.py --workdir /tmp/bench-scale-out        # 100,000 font scenes
    python benchmarks/bench_scale_out.py --examples 20000 --rounds 1           # a quick look
    python benchmarks/bench_scale_out.py --partitions 16                       # 16 lanes: W=16 divides
    python benchmarks/bench_scale_out.py --prefetch-factor 8                   # as docs/reading.md advises

Builds (once, kept in ``--workdir``: ``bench_read.py``'s `prepare`) black 48x48x3 scenes of
font glyphs in shards of 1,000 rows, then, on that dataset, each in a fresh process (peak RSS
from ``VmHWM``; CPU seconds of the process and of its workers, which the loader joins at an
epoch's end when they are not persistent), ``--rounds`` times, alternated:

* ``main``: ``for batch in ds.stream(256, shuffle=True)`` in the process itself, 2 epochs
  (the first and the later one);
* ``loader N``: ``DataLoader(ds.stream(256, shuffle=True), batch_size=None, num_workers=N,
  persistent_workers=False)`` for N = 1, 2, 2 epochs; an epoch is timed from the first batch
  asked for to the last one received, so the workers' start-up (fork, the first window
  decoded) is inside it; each worker's peak RSS is read at the epoch's last batch;
* ``rank W``: one epoch of ``ds.stream(256 // W, rank=0, world_size=W)`` for W = 1, 2, 4, 8, 16.

The peak RSS of a process that imports torch is printed beside what importing torch alone
takes (about 220 MB here: over the 200 MB goal before glyphforge reads a row).

Every figure is a ratio to the main-process stream's (or to W = 1) of the same round. The
stream reads the shards (``random_access="decode"``), or the decoded copy with ``--source copy``
(made here if missing). The goals (issue 33): DataLoader nw=2 >= 1.0x the main process, nw=1
>= 0.8x; rank 0 at W=8 <= 0.2x the time of W=1, at W=16 <= 0.12x; <= 200 MB per process.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import (  # noqa: E402
    ENTRY_KEY,
    open_dataset,
    parse_or_run_child,
    peak_mb,
    prepare,
    remove_decoded_copy,
    run_child,
)

GOALS = {"loader 1": 0.8, "loader 2": 1.0, "rank 8": 0.2, "rank 16": 0.12, "mb": 200.0}
WORLD_SIZES = (1, 2, 4, 8, 16)
EPOCHS = 2


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children waited for (the loader's workers once joined)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def children_peak_mb() -> list[float]:
    """Peak RSS (VmHWM) of each child process alive now (the loader's workers), in MB."""
    import psutil

    peaks = []
    for child in psutil.Process().children(recursive=True):
        try:
            with open(f"/proc/{child.pid}/status", encoding="ascii") as status:
                peaks += [int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")]
        except OSError:
            continue
    return peaks


def step_epochs(data_dir: str, source: str, order: str, workers: str, loader_options: str = "{}") -> dict:
    """``EPOCHS`` shuffled epochs of batches of 256, in this process (``workers="0"``) or through a DataLoader
    (``loader_options``: JSON of its other options, e.g. ``prefetch_factor``)."""
    num_workers, torch_mb = int(workers), 0.0
    if num_workers:
        import torch.utils.data  # before the stream is made: it is then a torch IterableDataset

        torch_mb = peak_mb()  # what importing torch takes, before glyphforge does anything
    ds = open_dataset(data_dir).reopened(random_access="decode" if source == "shards" else "auto")
    stream = ds.stream(256, shuffle=True, seed=0, **json.loads(order))
    batches: Any = stream if not num_workers else torch.utils.data.DataLoader(
        stream, batch_size=None, num_workers=num_workers, persistent_workers=False, **json.loads(loader_options))
    rates, cpu_rates, worker_mb = [], [], []
    for _ in range(EPOCHS):
        count, started, cpu = 0, time.perf_counter(), cpu_seconds()
        iterator = iter(batches)
        for at, (images, _targets) in enumerate(iterator, 1):
            count += len(images)
            if num_workers and at == len(batches):  # the last batch: the workers are alive still
                worker_mb += children_peak_mb()
        seconds = time.perf_counter() - started
        del iterator  # the workers are joined: their CPU time is counted
        rates.append(count / seconds)
        cpu_rates.append(count / (cpu_seconds() - cpu))
    return {"rates": rates, "cpu_rates": cpu_rates, "mb": peak_mb(), "worker_mb": max(worker_mb, default=0.0),
            "torch_mb": torch_mb}


def step_rank(data_dir: str, source: str, order: str, world_size: str) -> dict:
    """One epoch of rank 0 of ``world_size`` (batches of ``256 // world_size``) in this process."""
    size = int(world_size)
    ds = open_dataset(data_dir).reopened(random_access="decode" if source == "shards" else "auto")
    count, started, cpu = 0, time.perf_counter(), time.process_time()
    for images, _targets in ds.stream(256 // size, shuffle=True, seed=0, rank=0, world_size=size,
                                      **json.loads(order)):
        count += len(images)
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "rows": count,
            "mb": peak_mb()}


STEPS = {"epochs": step_epochs, "rank": step_rank}


def run_step(name: str, *args: str) -> dict:
    return run_child(__file__, name, *args)


def report_round(number: int, runs: dict[str, dict], ranks: dict[int, dict]) -> None:
    main = runs["main"]
    print(f"\nround {number} (load {os.getloadavg()[0]:.1f})")
    print(f"{'':26s} {'epoch 1 ex/s':>13s} {'epoch 2 ex/s':>13s} {'x main':>13s} {'CPU ex/s':>17s} "
          f"{'x main CPU':>11s} {'peak MB':>15s}")
    for name, run in runs.items():
        ratios = "/".join(f"{run['rates'][e] / main['rates'][e]:.2f}" for e in range(EPOCHS))
        cpu = "/".join(f"{rate / 1000:.0f}k" for rate in run["cpu_rates"])
        cpu_ratio = statistics.mean(run["cpu_rates"]) / statistics.mean(main["cpu_rates"])
        goal, ratio = GOALS.get(name), run["rates"][-1] / main["rates"][-1]
        met = "" if goal is None else f"  goal >= {goal}x (epoch 2): {'yes' if ratio >= goal else 'NO'}"
        mb = f"{run['mb']:.0f}" + (f" (worker {run['worker_mb']:.0f}, torch alone {run['torch_mb']:.0f})"
                                   if run["worker_mb"] else "")
        mb += "" if max(run["mb"], run["worker_mb"]) <= GOALS["mb"] else " > 200"
        print(f"{name:26s} {run['rates'][0]:13,.0f} {run['rates'][1]:13,.0f} {ratios:>13s} {cpu:>17s} "
              f"{cpu_ratio:11.2f} {mb:>15s}{met}")
    print("rank 0 of world size W: one epoch (time, CPU s, x W=1, the whole job's ex/s with a core a rank, peak MB)")
    one = ranks[1]
    for size, run in ranks.items():
        goal = GOALS.get(f"rank {size}")
        ratio, job = run["seconds"] / one["seconds"], size * run["rows"] / run["seconds"]
        met = "" if goal is None else f"  goal <= {goal}x: {'yes' if ratio <= goal else 'NO'}"
        print(f"  W={size:<3d} {run['rows']:8,d} rows  {run['seconds']:6.2f} s  CPU {run['cpu']:6.2f} s  "
              f"{ratio:5.2f}x (CPU {run['cpu'] / one['cpu']:.2f}x)  job {job:9,.0f} ex/s  {run['mb']:.0f} MB{met}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="times each step runs, alternated")
    parser.add_argument("--source", choices=["shards", "copy"], default="shards",
                        help="what the stream reads: the shards, or the decoded copy (made if missing)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-scale-out")
    parser.add_argument("--partitions", type=int, help="the streams' partitions (default: the stream's own)")
    parser.add_argument("--turns", type=int, help="the streams' turns (default: the stream's own)")
    parser.add_argument("--prefetch-factor", type=int,
                        help="the loaders' prefetch_factor (default: torch's, 2; docs/reading.md advises 8)")
    args = parse_or_run_child(parser, STEPS)
    if args is None:
        return
    data_dir = str(prepare(argparse.Namespace(glyphs="font", examples=args.examples, backgrounds="none",
                                              workdir=args.workdir, emnist_workdir=None)))
    if args.source == "copy":
        open_dataset(data_dir).materialize()
    else:
        remove_decoded_copy(data_dir)
    print(f"entry {os.environ[ENTRY_KEY]}, reading the {args.source}; loader epochs timed from the first batch "
          "asked for: worker start-up inside")
    order = json.dumps({name: value for name, value in (("partitions", args.partitions), ("turns", args.turns))
                        if value is not None})
    loader = json.dumps({} if args.prefetch_factor is None else {"prefetch_factor": args.prefetch_factor})
    print(f"stream options {order}, loader options {loader}")
    for number in range(1, args.rounds + 1):
        runs = {name: run_step("epochs", data_dir, args.source, order, workers, loader)
                for name, workers in (("main", "0"), ("loader 1", "1"), ("loader 2", "2"))}
        ranks = {size: run_step("rank", data_dir, args.source, order, str(size)) for size in WORLD_SIZES}
        report_round(number, runs, ranks)


if __name__ == "__main__":
    main()
