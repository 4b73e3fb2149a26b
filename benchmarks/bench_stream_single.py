"""The default stream in one process against its references, side by side (issue 46's table).

    python benchmarks/bench_stream_single.py --workdir /tmp/bench-stream-single        # 50,000 font scenes
    python benchmarks/bench_stream_single.py --rounds 3 --only default,one-lane,isal   # rows 1-3 only

Builds (once, kept in ``--workdir``: ``bench_read.py``'s `prepare`) black 48x48x3 scenes of font
glyphs in shards of 1,000 rows. Then, ``--rounds`` times, each step in a fresh process, the
steps alternated (so each ratio compares figures measured under the same load; the best of
the rounds is printed beside every round):

* ``default``: two shuffled epochs of ``ds.stream(256)`` from the shards (the later one counts);
* ``one-lane``: the same with ``partitions=1, turns=1, window=28`` (windows of 28 blocks of 149 rows, about
  4 shards: the order before issue 33);
* ``isal``: every shard's gzip members (read into memory first) inflated by ``isal_zlib`` on 2 threads;
* ``resume``: the rest of epoch 0 from ``state_after(90% of its batches)`` against one whole
  epoch, each in a fresh process, the clock started after the imports (``bench_resume.py``'s rule);
* ``copy``: in one process, after one epoch of each, ``--copy-epochs`` epochs of the stream from
  the decoded copy alternated with as many of the same batches gathered from
  ``np.load(mmap_mode="r")`` of the export (mapped afresh each epoch, as the stream's pages are
  unmapped after each window); the best epoch of each (an epoch is ~0.1 s: one epoch of each in
  its own process was noise on a loaded machine);
* ``rank16``: one epoch of rank 0 of 16 (against the default's W = 1 in ``rank1``);
* ``loader2``: ``DataLoader(ds.stream(256), batch_size=None, num_workers=2, persistent_workers=True,
  prefetch_factor=8)`` (what docs/reading.md recommends),
  the later of two epochs, against ``default``.

Peak RSS is ``VmHWM`` of the step's process (not shown for ``copy``: its process maps the export too).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import (  # noqa: E402
    open_dataset,
    parse_or_run_child,
    peak_mb,
    prepare,
    run_child,
    stream_rows,
)

ONE_LANE = {"partitions": 1, "turns": 1, "window": 28}
GOALS = {"x isal": (">=", 0.95), "x one-lane": (">=", 1.0), "RSS x one-lane": ("<=", 1.2),
         "resume / epoch": ("<=", 0.15), "copy x mmap": (">=", 0.9), "rank16 x rank1": ("<=", 0.12),
         "loader2 x main": (">=", 1.0)}


def step_stream(data_dir: str, source: str, order: str) -> dict:
    """Two shuffled epochs of ``ds.stream(256, **order)`` read from ``source`` (shards or copy)."""
    ds = open_dataset(data_dir).reopened(random_access="decode" if source == "shards" else "auto")
    stream = ds.stream(256, shuffle=True, seed=0, **json.loads(order))
    rates, cpu = [], []
    for _ in range(2):
        count, started, started_cpu = 0, time.perf_counter(), time.process_time()
        for images, _targets in stream:
            count += len(images)
        rates.append(count / (time.perf_counter() - started))
        cpu.append(count / (time.process_time() - started_cpu))
    return {"rate": rates[-1], "cpu_rate": cpu[-1], "mb": peak_mb()}


def step_isal(data_dir: str) -> dict:
    """Every shard's members inflated by isal on 2 threads (the bytes read before the clock)."""
    from isal import isal_zlib

    def inflate(data: bytes) -> int:  # every member of the shard's run, one after the other
        inflated = 0
        while data:
            member = isal_zlib.decompressobj(wbits=31)
            inflated += len(member.decompress(data))
            data = member.unused_data
        return inflated

    from glyphforge.builds.reading.members import Scratch

    ds = open_dataset(data_dir).reopened(random_access="decode")
    members = [ds.source.read(number, lambda member: bytes(Scratch().member_bytes(member)))
               for number in range(len(ds.index))]
    rates = []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(2):
            started = time.perf_counter()
            sizes = list(pool.map(inflate, members))
            rates.append(len(ds) / (time.perf_counter() - started))
    return {"rate": rates[-1], "bytes": sum(sizes), "mb": peak_mb()}


def step_resume(data_dir: str, at: str) -> dict:
    """A whole epoch (``at`` 0), or the rest of it from ``at`` of its batches (the stream's code imported before)."""
    ds = open_dataset(data_dir).reopened(random_access="decode")
    import glyphforge.builds.stream.stream  # noqa: F401  (imported before the clock, as a resumed job has)

    started = time.perf_counter()
    stream = ds.stream(256, seed=0)
    if float(at):
        stream = ds.stream(256, seed=0, resume=stream.state_after(int(float(at) * stream.batches_per_rank)))
    count = sum(len(images) for images, _ in stream)
    return {"seconds": time.perf_counter() - started, "count": count, "mb": peak_mb()}


def step_rank(data_dir: str, world_size: str) -> dict:
    """One epoch of rank 0 of ``world_size`` from the shards."""
    size = int(world_size)
    ds = open_dataset(data_dir).reopened(random_access="decode")
    started = time.perf_counter()
    for _ in ds.stream(256 // size, shuffle=True, seed=0, rank=0, world_size=size):
        pass
    return {"seconds": time.perf_counter() - started, "mb": peak_mb()}


#: What docs/reading.md tells DataLoader users to give (torch's default, 2, starves the loop of small batches).
PREFETCH_FACTOR = 8


def step_loader(data_dir: str, workers: str) -> dict:
    """Two epochs through a DataLoader of ``workers`` persistent workers (the later one counts)."""
    import torch.utils.data

    ds = open_dataset(data_dir).reopened(random_access="decode")
    loader = torch.utils.data.DataLoader(ds.stream(256, shuffle=True, seed=0), batch_size=None,
                                         num_workers=int(workers), persistent_workers=True,
                                         prefetch_factor=PREFETCH_FACTOR)
    rates = []
    for _ in range(2):
        count, started = 0, time.perf_counter()
        for images, _targets in loader:
            count += len(images)
        rates.append(count / (time.perf_counter() - started))
    return {"rate": rates[-1], "mb": peak_mb()}


def step_copy(data_dir: str, export_dir: str, epochs: str) -> dict:
    """The stream from the decoded copy and its batches gathered from the export's memory maps, epochs alternated."""
    dataset = open_dataset(data_dir).reopened(random_access="auto")
    stream = dataset.stream(256, shuffle=True, seed=0)
    rows, paths = stream_rows(data_dir), sorted(Path(export_dir).glob("*.npy"))
    # both sides' pages leave the page cache, to be read back alike by the first epochs: how a file was written
    # decides the size of its cached pages (huge file pages here), which moved the reference's rate 1.5x
    for path in [*paths, *Path(f"{dataset.path}.decoded").glob("*.npy")]:
        descriptor = os.open(path, os.O_RDONLY)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(descriptor)

    def copy_epoch() -> None:
        for _batch in stream:
            pass

    def mmap_epoch() -> None:
        arrays = [np.load(path, mmap_mode="r") for path in paths]
        for start in range(0, len(rows), 256):
            _batch = [array[rows[start:start + 256]] for array in arrays]

    best = {"copy": (np.inf, np.inf), "mmap": (np.inf, np.inf)}
    for turn in range(int(epochs) + 1):
        for name, epoch in (("copy", copy_epoch), ("mmap", mmap_epoch)):
            started, started_cpu = time.perf_counter(), time.process_time()
            epoch()
            if turn:  # the first of each warms the page cache and the stream's code
                took = (time.perf_counter() - started, time.process_time() - started_cpu)
                best[name] = (min(best[name][0], took[0]), min(best[name][1], took[1]))
    return {"rate": len(rows) / best["copy"][0], "cpu_rate": len(rows) / best["copy"][1],
            "per_s": len(rows) / best["mmap"][0], "cpu_per_s": len(rows) / best["mmap"][1]}


STEPS = {"stream": step_stream, "isal": step_isal, "resume": step_resume, "rank": step_rank, "loader": step_loader,
         "copy": step_copy}


def round_figures(data_dir: str, export_dir: str, only: set[str], copy_epochs: int) -> dict[str, tuple[float, str]]:
    """One round: each step in a fresh process, in turn; the figures of the table."""
    run = {}
    if only & {"default", "one-lane", "isal", "loader2"}:
        run["default"] = run_child(__file__, "stream", data_dir, "shards", "{}")
    if "one-lane" in only:
        run["one-lane"] = run_child(__file__, "stream", data_dir, "shards", json.dumps(ONE_LANE))
    if "isal" in only:
        run["isal"] = run_child(__file__, "isal", data_dir)
    if "resume" in only:
        run["whole"], run["resume"] = (run_child(__file__, "resume", data_dir, at) for at in ("0", "0.9"))
    if "copy" in only:
        run["copy"] = run_child(__file__, "copy", data_dir, export_dir, str(copy_epochs))
    if "rank16" in only:
        run["rank1"], run["rank16"] = (run_child(__file__, "rank", data_dir, size) for size in ("1", "16"))
    if "loader2" in only:
        run["loader2"] = run_child(__file__, "loader", data_dir, "2")
    figures: dict[str, tuple[float, str]] = {}
    default = run.get("default")
    if "isal" in run:
        figures["x isal"] = (default["rate"] / run["isal"]["rate"],
                             f"{default['rate']:,.0f} / {run['isal']['rate']:,.0f} ex/s")
    if "one-lane" in run:
        lane = run["one-lane"]
        figures["x one-lane"] = (default["rate"] / lane["rate"], f"{default['rate']:,.0f} / {lane['rate']:,.0f} ex/s "
                                 f"(CPU {default['cpu_rate'] / lane['cpu_rate']:.2f}x)")
        figures["RSS x one-lane"] = (default["mb"] / lane["mb"], f"{default['mb']:.0f} / {lane['mb']:.0f} MB")
    if "resume" in run:
        figures["resume / epoch"] = (run["resume"]["seconds"] / run["whole"]["seconds"],
                                     f"{run['resume']['seconds']:.3f} / {run['whole']['seconds']:.3f} s")
    if "copy" in run:
        copy = mapped = run["copy"]
        figures["copy x mmap"] = (copy["rate"] / mapped["per_s"], f"{copy['rate']:,.0f} / {mapped['per_s']:,.0f} ex/s "
                                  f"(CPU {copy['cpu_rate'] / mapped['cpu_per_s']:.2f}x)")
    if "rank16" in run:
        figures["rank16 x rank1"] = (run["rank16"]["seconds"] / run["rank1"]["seconds"],
                                     f"{run['rank16']['seconds']:.3f} / {run['rank1']['seconds']:.3f} s")
    if "loader2" in run:
        figures["loader2 x main"] = (run["loader2"]["rate"] / default["rate"],
                                     f"{run['loader2']['rate']:,.0f} / {default['rate']:,.0f} ex/s")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--copy-epochs", type=int, default=5, help="the epochs of each the copy row alternates")
    parser.add_argument("--only", default="default,one-lane,isal,resume,copy,rank16,loader2",
                        help="the figures to measure (comma-separated)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-stream-single")
    args = parse_or_run_child(parser, STEPS)
    if args is None:
        return
    only = set(args.only.split(","))
    data_dir = str(prepare(argparse.Namespace(glyphs="font", examples=args.examples, backgrounds="none",
                                              workdir=args.workdir, emnist_workdir=None)))
    export_dir = str(args.workdir / "export")
    if "copy" in only:
        ds = open_dataset(data_dir)
        ds.materialize()
        if not Path(export_dir).exists():
            ds.export(export_dir)
    rounds: list[dict[str, tuple[float, str]]] = []
    for number in range(1, args.rounds + 1):
        rounds.append(round_figures(data_dir, export_dir, only, args.copy_epochs))
        print(f"round {number} (load {os.getloadavg()[0]:.1f}): " + "; ".join(
            f"{name} {value:.2f} ({detail})" for name, (value, detail) in rounds[-1].items()), flush=True)
    print("\nfigure            best    goal   met   rounds")
    for name, (sign, goal) in GOALS.items():
        values = [figures[name][0] for figures in rounds if name in figures]
        if not values:
            continue
        best = max(values) if sign == ">=" else min(values)
        met = best >= goal if sign == ">=" else best <= goal
        print(f"{name:16s} {best:6.2f}  {sign}{goal:<5}  {'yes' if met else 'NO':4s}  "
              + ", ".join(f"{value:.2f}" for value in values))


if __name__ == "__main__":
    main()
