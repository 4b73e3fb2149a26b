"""Reading a built dataset where it lies (issue #25): ds[i] over HTTP, shuffled epochs over S3.

    python benchmarks/bench_remote_read.py                       # 100,000 font scenes, 100 shards
    python benchmarks/bench_remote_read.py --examples 20000 --workdir /tmp/bench-remote

Builds (once, cached in ``--workdir``, with `bench_read.prepare`) 48x48x3 scenes of font
glyphs in shards of 1,000, then measures, on loopback servers:

* **ds[i] over HTTP** (the project's Range server, tests/support/http_server.py, serving the
  data dir): ``gf.open_built(entry URL)[i]`` with a cold local cache, for 5 rows in 5
  different shards, each by a fresh reader with its own cache dir. Every body byte the server
  sent (manifest, index, shard) over the bytes of the shard holding the row; the goal is
  <= 1.1x.
* **Shuffled epochs over S3** (moto's server in a process of its own, as S3 is not in the
  reader's process): the entry is uploaded with s3fs (data files first, the manifest last),
  then, in 5 rounds (interleaved, so that the shared machine's load weighs on each alike; the
  best of each kind counts): an epoch of ``ds.stream(256, shuffle=True)`` of the local entry,
  one over S3 with a cold local shard cache (a cache dir of its own each round), a second epoch
  by a new reader on that cache, and, for the record, a first epoch with a shard cache smaller
  than twice the entry, so that shards are fetched one by one rather than in runs of up to
  8 MB. The S3 epochs as ratios of the local one's examples/s; goals: >= 0.5 and >= 0.9.
  Every epoch must give the local epoch's example count and pixel checksum.
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
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_read import ENTRY_KEY, prepare  # noqa: E402
from moto_process import start_moto  # noqa: E402

#: Rounds of epochs; the fastest of each kind counts (the machine is shared: an epoch is a fraction of a second).
TRIES = 5


def epoch(dataset) -> tuple[float, int, int]:
    """One shuffled epoch of ``dataset.stream(256)``: seconds, examples and a pixel checksum."""
    started = time.perf_counter()
    count = checksum = 0
    for images, _ in dataset.stream(256, shuffle=True, seed=1):
        count += len(images)
        checksum += int(images[:, 24, 24].sum(dtype=np.int64))
    return time.perf_counter() - started, count, checksum


def http_reads(entry_dir: Path, data_dir: Path, scratch: Path) -> None:
    import glyphforge as gf

    from support.http_server import LocalHTTPServer

    relative = entry_dir.relative_to(data_dir).as_posix()
    with LocalHTTPServer(directory=data_dir) as server:
        local = gf.open_built(entry_dir)
        rng = np.random.default_rng(0)
        shards = rng.choice(len(local.index), size=5, replace=False)
        for number in shards.tolist():
            row = int(local.index.start[number]) + int(rng.integers(local.index.rows[number]))
            before = server.bytes_served()
            started = time.perf_counter()
            remote = gf.open_built(server.url(relative), cache_dir=scratch / f"http-{number}")
            image, _ = remote[row]
            seconds = time.perf_counter() - started
            assert np.array_equal(image, local[row][0])
            served = server.bytes_served() - before
            shard = int(local.index.length[number])
            print(f"ds[{row}] over HTTP (shard {number}): {served:,} bytes served for a shard of {shard:,} bytes: "
                  f"{served / shard:.3f}x (goal <= 1.1x), {seconds * 1000:.0f} ms cold (manifest, index, shard)")


def s3_epochs(entry_dir: Path, scratch: Path) -> None:
    import glyphforge as gf

    server, endpoint = start_moto()
    os.environ.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=endpoint)
    try:
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.mkdir("gf-bench")
        key = f"gf-bench/data/cache/{entry_dir.parent.name}/{entry_dir.name}"
        started = time.perf_counter()
        names = sorted(path.name for path in entry_dir.iterdir() if path.name != "manifest.json")
        for name in [*names, "manifest.json"]:  # data first, manifest last
            fs.put_file(str(entry_dir / name), f"{key}/{name}")
        print(f"uploaded the entry to moto in {time.perf_counter() - started:.1f} s")

        local = gf.open_built(entry_dir)
        _, count, checksum = epoch(local)  # warms the page cache
        small = 2 * sum(path.stat().st_size for path in entry_dir.iterdir()) - 1  # the entry: over half of it
        kinds = {"local stream": (None, None), "S3 first epoch (cold shard cache)": (0.5, None),
                 "S3 second epoch (local shard cache)": (0.9, None),
                 "S3 first epoch, shard by shard (a cache under twice the entry)": (None, small)}
        timings: dict[str, list[float]] = {label: [] for label in kinds}
        for round_ in range(TRIES):  # interleaved, so that the machine's load weighs on each kind alike
            for label, (_, size) in kinds.items():
                cache = scratch / f"{'small' if size else 'cache'}-{round_}"
                dataset = local if label == "local stream" else gf.open_built(f"s3://{key}", cache_dir=cache,
                                                                               cache_size=size)
                seconds, got, sums = epoch(dataset)
                assert (got, sums) == (count, checksum), f"{label}: {got} examples, checksum {sums}"
                timings[label].append(seconds)
        local_rate = count / min(timings["local stream"])
        for label, (goal, _) in kinds.items():
            rate = count / min(timings[label])
            ratio = "" if label == "local stream" else f": {rate / local_rate:.2f}x the local stream" + (
                f" (goal >= {goal})" if goal else "")
            print(f"{label}: {rate:,.0f} examples/s ({min(timings[label]):.2f} s, best of {TRIES}){ratio}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-remote")
    args = parser.parse_args()
    args.glyphs, args.backgrounds = "font", "none"
    args.workdir.mkdir(parents=True, exist_ok=True)
    data_dir = prepare(args)
    from glyphforge.builds.reading.lookup import find_built

    entry_dir = find_built(os.environ[ENTRY_KEY], data_dir=data_dir).path
    scratch = Path(tempfile.mkdtemp(prefix="remote-read-", dir=args.workdir))
    try:
        http_reads(entry_dir, data_dir, scratch)
        s3_epochs(entry_dir, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
