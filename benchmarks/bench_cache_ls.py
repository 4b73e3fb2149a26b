"""`glyphforge cache ls` with a 100,000-shard built entry in the cache (its shard index a data file, index.npy).

    python benchmarks/bench_cache_ls.py                      # 100,000 shards
    python benchmarks/bench_cache_ls.py --shards 1000000 --repeat 3

Writes, in a temporary data dir, a synthetic built entry through the cache store
(``index.npy``, a data file listed in the manifest; glyphforge 0.2 kept the index as JSON
lists in the manifest, 269 ms for ``CacheStore.ls()`` at 100,000 shards), beside 20 small
entries. Its ``arrays.pklz`` is a sparse file of the size its index declares: listing never opens data
files. It prints the manifest's size, ``CacheStore.ls()`` (median of ``--repeat`` calls in this process),
the whole ``glyphforge cache ls`` command (median of ``--repeat`` runs, Python start
included), and reading the index once a reader asks for it (``ShardIndex.of_entry``).
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import CacheStore

ROWS_PER_SHARD = 100
SHARD_BYTES = 500_000
SMALL_ENTRIES = 20


def _entry(store: CacheStore, n_shards: int) -> None:
    """Write the synthetic built entry of ``n_shards`` shards."""
    index = ShardIndex.from_lengths(np.full(n_shards, SHARD_BYTES), np.full(n_shards, ROWS_PER_SHARD))
    params = {"n_examples": n_shards * ROWS_PER_SHARD, "shard_size": ROWS_PER_SHARD}
    with store.create("bench-scenes", params) as writer:
        with (writer.path / "arrays.pklz").open("wb") as data:  # sparse, the size the index declares: never read
            data.truncate(n_shards * SHARD_BYTES)
        writer.meta.update(n_examples=n_shards * ROWS_PER_SHARD, n_shards=n_shards,
                           layout={"images": {"dtype": "|u1", "shape": [48, 48, 3]}}, metadata={}, images="images")
        index.write(writer.path / INDEX_FILE)
    for number in range(SMALL_ENTRIES):
        with store.create("bench-small", {"number": number}) as writer:
            writer.write("a.pklz", np.zeros(10, np.uint8))


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    command = [str(Path(sys.executable).with_name("glyphforge")), "cache", "ls"]  # the console script
    print(f"{args.shards:,} shards, {SMALL_ENTRIES} small entries beside it; medians of {args.repeat}")
    print(f"{'manifest':>10} {'store.ls()':>11} {'cache ls':>9} {'index read':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-cache-ls-") as data_dir:
        store = CacheStore.for_data_dir(data_dir)
        _entry(store, args.shards)
        (built,) = [entry for entry in store.ls() if entry.kind == "bench-scenes"]
        manifest_bytes = (built.path / "manifest.json").stat().st_size
        ls_seconds = _median_seconds(store.ls, args.repeat)
        env = {**os.environ, "GLYPHFORGE_DATA_DIR": data_dir}
        cli_seconds = _median_seconds(
            functools.partial(subprocess.run, command, env=env, check=True, capture_output=True), args.repeat)
        index_seconds = _median_seconds(functools.partial(ShardIndex.of_entry, built, "bench"), args.repeat)
        print(f"{manifest_bytes / 1e3:>7,.1f} KB {ls_seconds * 1000:>8.1f} ms "
              f"{cli_seconds:>7.2f} s {index_seconds * 1000:>8.1f} ms")


if __name__ == "__main__":
    main()
