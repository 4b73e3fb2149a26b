"""Reading a large built dataset: random access, streaming, export, against loading every array.

    python benchmarks/bench_read.py                    # 500,000 scenes with EMNIST glyphs
    python benchmarks/bench_read.py --glyphs font      # font glyphs: no EMNIST archive needed
    python benchmarks/bench_read.py --examples 100000 --workdir /tmp/bench-read

Builds (once, cached in ``--workdir``) 500,000 48x48x3 scenes of 1-3 glyphs, black
(the issue's workload) or on the real textures of ../shared/data (``--backgrounds
hard``): EMNIST glyphs from the full-size synthetic byclass archive that
``bench_emnist.py`` writes (made here if missing), or font glyphs with ``--glyphs font``.
Then, each in a fresh process (so peak RSS is that step's own, read from VmHWM):

* ``ds[i]`` cold (the first read: index, open, one shard decoded) and warm (a row of
  the shard just read; median of 1,000);
* ``ds.take(16 random rows)``: time and peak RSS;
* a full shuffled epoch through ``ds.stream(256)``: examples/s and peak RSS, next to
  loading ``ds.arrays`` (the reference);
* ``ds.export(dir)``: MB/s of pixels written, then random rows through the exported
  ``images.npy`` memory map;
* random order, map-style (what ``DataLoader(ds, shuffle=True)`` does): an epoch of
  ``ds.take(256 random rows)`` decoding shards (``random_access="decode"``, a few batches:
  the old trap), the first shuffled epoch with the default ``random_access="auto"`` (it
  makes the decoded copy on the way), a shuffled epoch after that first pass (the copy is
  there: the goal is >= 50% of the stream's examples/s at <= 600 MB), and ``ds[i]`` one
  by one in random order (goal >= 20,000 rows/s). The decoded copy is removed first, so
  the earlier steps read shards as before;
* streaming past the inflate bound (issue 32), once the decoded copy exists (made here if
  the random takes made none), alternated
  twice: three epochs of ``ds.stream(256)`` from the shards (``random_access="decode"``) and
  from the decoded copy (the default), each in a fresh process: the first epoch against the
  later ones (goal >= 0.8), the copy's later epochs against the shards' (goal >= 1.5x), at
  <= 200 MB; and ``np.load(mmap_mode="r")`` of the export's arrays reading random 256-row
  batches (a shuffled epoch, as the random takes: the reference the copy's stream must reach,
  goal >= 1.0x) and reading the stream's own batches, one epoch in a fresh process each (the
  copy's stream against the random batches in CPU time too: on a loaded machine the wall
  clock of a 0.3 s epoch is mostly the scheduler's);
* the peer readers the ``bench`` extra installs (each skipped if not importable), as
  ../shared/notes/peer-readers.md measured them, the same scenes and the first glyph's label
  written once into ``--workdir`` in each tool's own format, one shuffled epoch in batches of
  256, one process, no DataLoader: WebDataset (tar shards of 1,000 raw ``.npy`` images;
  ``shardshuffle``, ``shuffle(5000)``), litdata (``litdata.optimize`` into raw numpy chunks of
  8 MB; ``StreamingDataset(dir, shuffle=True)``) and MosaicML streaming (``MDSWriter``, an
  ``ndarray:uint8:48,48,3`` column and an ``int`` label, raw shards of 8 MB;
  ``StreamingDataset(local=dir, shuffle=True)``). The goals: the stream >= 10x WebDataset and
  >= 2.5x litdata in the same run. Every peer must give the stream's example count, label sum
  and pixel checksum, so nothing skipped decoding. litdata and mosaicml-streaming pull in torch
  (pip picks 2.14.1, not CI's 2.13.0): install the extra in a venv of its own.

and, in this process, the bookkeeping of a 10,000,000-example dataset (an index of
10,000 and of 100,000 shards: reading it, planning an epoch for one of 8 ranks) to
show how time and memory grow.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "data"
#: The environment variable naming the entry the steps read (the key of the scenes `prepare` built).
ENTRY_KEY = "GLYPHFORGE_BENCH_ENTRY"
GOALS = {"cold_ms": 50.0, "warm_ms": 1.0, "take_s": 0.5, "take_mb": 300.0, "stream_ratio": 0.8, "stream_mb": 400.0,
         "export_mb_s": 200.0, "random_ratio": 0.5, "random_mb": 600.0, "random_getitem": 20_000.0,
         "over_webdataset": 10.0, "over_litdata": 2.5, "first_epoch": 0.8, "copy_over_shards": 1.5,
         "copy_over_mmap": 1.0, "past_mb": 200.0}


def peak_mb() -> float:
    """This process's peak RSS in MB: VmHWM, which (unlike ru_maxrss) does not start from the parent's peak."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def open_dataset(data_dir: str) -> Any:
    from glyphforge.builds.reading.lookup import find_built

    return find_built(os.environ[ENTRY_KEY], data_dir)  # the entry `prepare` built: its data dir may hold others


# -- the steps, each run in a fresh process ------------------------------------------------
def step_getitem(data_dir: str) -> dict:
    ds = open_dataset(data_dir)  # a handle: the manifest is read, nothing else
    row = 123_456 % len(ds)
    started = time.perf_counter()
    ds[row]  # the first read: the index, then one shard decoded
    cold = time.perf_counter() - started
    warm = []
    for offset in range(1, 1001):
        started = time.perf_counter()
        ds[row - row % 1000 + (row + offset) % 1000]
        warm.append(time.perf_counter() - started)
    return {"cold_ms": cold * 1000, "warm_ms": statistics.median(warm) * 1000}


def step_take(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    rows = np.random.default_rng(0).choice(len(ds), 16, replace=False)
    started = time.perf_counter()
    taken = ds.take(rows)
    return {"take_s": time.perf_counter() - started, "take_mb": peak_mb(), "rows": len(taken["images"])}


def checksums(images: np.ndarray, labels: np.ndarray) -> tuple[int, int]:
    """A batch's pixel checksum (its centre pixels: cheap, and every image decoded) and label sum."""
    return int(images[:, 24, 24].sum(dtype=np.int64)), int(labels.sum(dtype=np.int64))


def step_stream(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    count = pixels = labels = 0
    started = time.perf_counter()
    for images, targets in ds.stream(256, shuffle=True, seed=0):
        count += len(images)
        batch_pixels, batch_labels = checksums(images, targets["labels"][:, 0])
        pixels, labels = pixels + batch_pixels, labels + batch_labels
    seconds = time.perf_counter() - started
    return {"examples": count, "per_s": count / seconds, "seconds": seconds, "mb": peak_mb(), "pixels": pixels,
            "labels": labels}


def count_batches(batches: Any) -> dict:
    """Read ``batches`` of (images, labels) to the end: examples/s, peak RSS, pixel checksum and label sum."""
    count = pixels = labels = 0
    started = time.perf_counter()
    for images, batch_labels in batches:
        count += len(images)
        batch_pixels, label_sum = checksums(np.asarray(images), np.asarray(batch_labels))
        pixels, labels = pixels + batch_pixels, labels + label_sum
    seconds = time.perf_counter() - started
    return {"examples": count, "per_s": count / seconds, "seconds": seconds, "mb": peak_mb(), "pixels": pixels,
            "labels": labels}


def batched(samples: Any, size: int = 256) -> Any:
    """Collate a peer's samples (dicts of an ``image`` array and an int ``label``) into numpy batches of ``size``."""
    images: list = []
    labels: list = []
    for sample in samples:
        images.append(sample["image"])
        labels.append(sample["label"])
        if len(images) == size:
            yield np.stack(images), np.asarray(labels)
            images, labels = [], []
    if images:
        yield np.stack(images), np.asarray(labels)


def scene_rows(data_dir: str) -> Any:
    """Every scene in order, as (image, label of the first glyph): what the peers' writers are given."""
    for images, targets in open_dataset(data_dir).stream(1000, shuffle=False):
        yield from zip(images, targets["labels"][:, 0].tolist(), strict=True)


def disk_mb(directory: Path) -> float:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file()) / 1e6


def fresh(out: Path) -> None:
    """Clear ``out`` for a new write, only when this benchmark made it: its claim file is beside it.

    A folder of that name that is not the benchmark's own (a user's, under a --workdir they
    chose) stops the run instead, untouched.
    """
    claim = out.with_name(out.name + ".bench-read")
    if out.exists() or out.is_symlink():
        if not claim.exists():
            raise SystemExit(f"{out} exists and bench_read.py did not make it: move it away, or give another --workdir")
        shutil.rmtree(out)
    claim.touch()


def write_webdataset(data_dir: str, out: Path) -> Path:
    """Write the scenes into ``out`` as WebDataset tar shards of 1,000 (image.npy, cls), once; return ``out``."""
    import webdataset as wds

    done = out / "done"
    if not done.exists():
        fresh(out)
        out.mkdir(parents=True)
        with wds.ShardWriter(str(out / "scenes-%06d.tar"), maxcount=1000, verbose=0) as sink:
            for row, (image, label) in enumerate(scene_rows(data_dir)):
                sink.write({"__key__": f"{row:07d}", "image.npy": image, "cls": label})
        done.touch()
    return out


def litdata_rows(task: tuple[str, int, int]) -> Any:
    """litdata's ``optimize`` function: the scenes ``start:stop`` of ``data_dir``, one sample each."""
    data_dir, start, stop = task
    taken = open_dataset(data_dir).take(np.arange(start, stop))
    for image, label in zip(taken["images"], taken["labels"][:, 0].tolist(), strict=True):
        yield {"image": image, "label": label}


def write_litdata(data_dir: str, out: Path) -> Path:
    """Write the scenes into ``out`` as litdata chunks of 8 MB (raw numpy), once; return ``out``."""
    import litdata

    done = out.with_name(out.name + ".done")  # beside it: optimize wants an empty output dir
    if not done.exists():
        fresh(out)
        n_rows = len(open_dataset(data_dir))
        tasks = [(data_dir, start, min(start + 1000, n_rows)) for start in range(0, n_rows, 1000)]
        litdata.optimize(fn=litdata_rows, inputs=tasks, output_dir=str(out), chunk_bytes="8MB", num_workers=2)
        done.touch()
    return out


def write_mds(data_dir: str, out: Path) -> Path:
    """Write the scenes into ``out`` as MosaicML MDS shards of 8 MB (raw, no compression), once; return ``out``."""
    from streaming import MDSWriter

    done = out.with_name(out.name + ".done")
    if not done.exists():
        fresh(out)
        columns = {"image": "ndarray:uint8:48,48,3", "label": "int"}
        with MDSWriter(out=str(out), columns=columns, size_limit=1 << 23) as sink:
            for image, label in scene_rows(data_dir):
                sink.write({"image": image, "label": label})
        done.touch()
    return out


def step_webdataset(shards_dir: str) -> dict:
    import webdataset as wds

    shards = sorted(str(path) for path in Path(shards_dir).glob("scenes-*.tar"))
    pipeline = (wds.WebDataset(shards, shardshuffle=len(shards), seed=0, empty_check=False).shuffle(5000)
                .decode().to_tuple("image.npy", "cls").batched(256))
    return count_batches(pipeline)


def step_litdata(chunks_dir: str) -> dict:
    from litdata import StreamingDataset

    return count_batches(batched(StreamingDataset(chunks_dir, shuffle=True, seed=0)))


def step_mds(shards_dir: str) -> dict:
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # a killed earlier run leaves its shared memory behind
    return count_batches(batched(StreamingDataset(local=shards_dir, shuffle=True, shuffle_seed=0, batch_size=256)))


def step_arrays(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    ds.arrays_limit = 1 << 40  # the reference: load everything, whatever it takes
    started = time.perf_counter()
    arrays = ds.arrays
    seconds = time.perf_counter() - started
    return {"examples": len(arrays["images"]), "per_s": len(ds) / seconds, "seconds": seconds, "mb": peak_mb()}


def step_export(data_dir: str, out: str) -> dict:
    ds = open_dataset(data_dir)
    fresh(Path(out))
    started = time.perf_counter()
    path = ds.export(out)
    seconds = time.perf_counter() - started
    export_peak = peak_mb()  # before the memory map below: its touched pages count as resident too
    pixels = len(ds) * int(np.prod(ds.layout["images"]["shape"]))
    images = np.load(path / "images.npy", mmap_mode="r")
    rows = np.random.default_rng(1).integers(0, len(images), 10_000)
    started = time.perf_counter()
    checksum = sum(int(images[row, 0, 0, 0]) for row in rows)
    per_row = (time.perf_counter() - started) / len(rows)
    return {"export_s": seconds, "export_mb_s": pixels / seconds / 1e6, "memmap_row_us": per_row * 1e6,
            "checksum": checksum, "mb": export_peak}


def shuffled_batches(ds: Any, count: int | None = None) -> tuple[int, float]:
    """Take ``count`` (default: all) batches of 256 rows of a random permutation; return (rows, seconds)."""
    order = np.random.default_rng(2).permutation(len(ds))
    starts = range(0, len(ds), 256)[:count]
    started = time.perf_counter()
    rows = sum(len(ds.take(order[start:start + 256])["images"]) for start in starts)
    return rows, time.perf_counter() - started


def step_random_decode(data_dir: str) -> dict:
    ds = open_dataset(data_dir).reopened(random_access="decode")
    rows, seconds = shuffled_batches(ds, 20)  # the whole epoch would take minutes
    return {"examples": rows, "per_s": rows / seconds, "seconds": seconds, "mb": peak_mb()}


def step_random_first(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    rows, seconds = shuffled_batches(ds)
    return {"examples": rows, "per_s": rows / seconds, "seconds": seconds, "mb": peak_mb(),
            "materialized": str(ds.materialized)}


def step_random_take(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    rows, seconds = shuffled_batches(ds)
    return {"examples": rows, "per_s": rows / seconds, "seconds": seconds, "mb": peak_mb(),
            "materialized": str(ds.materialized)}


def step_random_getitem(data_dir: str) -> dict:
    ds = open_dataset(data_dir)
    order = np.random.default_rng(3).permutation(len(ds)).tolist()
    started = time.perf_counter()
    checksum = sum(int(ds[i][0][0, 0, 0]) for i in order)
    seconds = time.perf_counter() - started
    return {"examples": len(order), "per_s": len(order) / seconds, "seconds": seconds, "mb": peak_mb(),
            "checksum": checksum}


def step_epochs(data_dir: str, mode: str) -> dict:
    """Three shuffled epochs of ``ds.stream(256)`` in this (fresh) process: from the shards (``mode="decode"``) or
    from the decoded copy (``"auto"``, the default); each epoch's examples/s, peak RSS."""
    ds = open_dataset(data_dir).reopened(random_access=mode)
    stream = ds.stream(256, shuffle=True, seed=0)
    rates, cpu_rates = [], []
    for _ in range(3):
        count, started, cpu = 0, time.perf_counter(), time.process_time()
        for images, _targets in stream:
            count += len(images)
        rates.append(count / (time.perf_counter() - started))
        cpu_rates.append(count / (time.process_time() - cpu))
    return {"first": rates[0], "later": statistics.mean(rates[1:]), "later_cpu": statistics.mean(cpu_rates[1:]),
            "mb": peak_mb(), "copy": str(ds.read_copy(lambda copy: copy.path))}  # None: the stream read the shards


def step_materialize(data_dir: str) -> dict:
    """Make the decoded copy unless the random takes made it (a dataset of fewer shards than the LRU holds)."""
    return {"copy": str(open_dataset(data_dir).materialize())}


def stream_rows(data_dir: str) -> np.ndarray:
    """The dataset's rows in the order ``ds.stream(256, shuffle=True, seed=0)`` yields them in epoch 0.

    The stream's own arithmetic (a private method: a benchmark may look inside).
    """
    stream = open_dataset(data_dir).stream(256, shuffle=True, seed=0)
    plan = stream.plan(0)
    by_place = np.concatenate([stream._window_rows(plan, 0, number)[0] for number in range(len(plan.ends))])
    return by_place[plan.cut.places(np.arange(plan.n_rows))]  # the parts end to end, in the epoch's order


def step_mmap(data_dir: str, export_dir: str, order: str) -> dict:
    """One epoch of 256-row batches of the export's arrays, each ``np.load(mmap_mode="r")``, every array gathered.

    ``order``: ``"random"`` (a shuffled epoch, the random takes' permutation) or ``"stream"`` (the stream's batches).
    The stream's batches hold every array (images and targets): so does each batch here.
    """
    rows = np.random.default_rng(2).permutation(len(open_dataset(data_dir))) if order == "random" \
        else stream_rows(data_dir)
    arrays = [np.load(path, mmap_mode="r") for path in sorted(Path(export_dir).glob("*.npy"))]
    count, started, cpu = 0, time.perf_counter(), time.process_time()
    for start in range(0, len(rows), 256):
        batch = [array[rows[start:start + 256]] for array in arrays]
        count += len(batch[0])
    return {"per_s": count / (time.perf_counter() - started), "cpu_per_s": count / (time.process_time() - cpu),
            "mb": peak_mb(), "arrays": len(arrays)}


def remove_decoded_copy(data_dir: str) -> None:
    """Remove the scenes' decoded copy left by an earlier run, so the first steps read shards as before."""
    from glyphforge.builds.decoded_copy.life import decoded_dir

    shutil.rmtree(decoded_dir(open_dataset(data_dir).path), ignore_errors=True)


STEPS = {"getitem": step_getitem, "take": step_take, "stream": step_stream, "arrays": step_arrays,
         "export": step_export, "random_decode": step_random_decode, "random_first": step_random_first,
         "random_take": step_random_take, "random_getitem": step_random_getitem, "webdataset": step_webdataset,
         "litdata": step_litdata, "mds": step_mds, "epochs": step_epochs, "mmap": step_mmap,
         "materialize": step_materialize}


def run_child(script: str, name: str, *args: str) -> dict:
    """Run step ``name`` of benchmark ``script`` in a fresh process (this checkout's glyphforge); its JSON result."""
    done = subprocess.run([sys.executable, script, "--child", name, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise SystemExit(f"the {name} step failed:\n{done.stderr}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_step(name: str, *args: str) -> dict:
    return run_child(__file__, name, *args)


# -- preparing the dataset -------------------------------------------------------------------
def prepare(args: argparse.Namespace) -> Path:
    """Return a data dir holding the built scenes (built once per workdir, glyph source and backgrounds)."""
    data_dir = args.workdir / f"data-{args.glyphs}-{args.backgrounds}"
    os.environ["GLYPHFORGE_MIRROR"] = SHARED_DATA.as_uri()  # the real textures, served locally
    os.environ["GLYPHFORGE_OFFLINE"] = "1"
    import glyphforge as gf
    from glyphforge.datasets.backgrounds import hard_background_names

    textures = None
    if args.backgrounds == "hard":  # the hard textures carried in ../shared/data (all but space.jpg)
        textures = [name for name in hard_background_names() if (SHARED_DATA / "backgrounds" / f"{name}.jpg").exists()]
    if args.glyphs == "emnist":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        sys.path.insert(0, str(ROOT / "tests"))
        from bench_emnist import FULL, build_archive

        args.emnist_workdir.mkdir(parents=True, exist_ok=True)
        archive = build_archive(args.emnist_workdir, FULL)
        gf.prepare_emnist(archives={"gzip.zip": archive}, verify=False, shapes=[(14, 14)], data_dir=data_dir,
                          progress=False)
    spec = gf.ScatteredGlyphs(args.examples, glyphs=args.glyphs, backgrounds=textures, shard_size=1000, seed=0)
    started = time.perf_counter()
    dataset = gf.build(spec, session="processes:2", data_dir=data_dir, progress=False)
    os.environ[ENTRY_KEY] = dataset.key  # for the steps, each in a child process
    print(f"dataset: {len(dataset):,} scenes of {args.glyphs} glyphs, {len(dataset.index)} shards, "
          f"arrays.pklz {(dataset.path / 'arrays.pklz').stat().st_size / 1e6:.0f} MB, "
          f"{dataset.nbytes / 1e9:.2f} GB decoded (ready in {time.perf_counter() - started:.1f} s)")
    return data_dir


# -- 10,000,000 examples: bookkeeping only ------------------------------------------------------
def simulate(n_examples: int, scratch: Path) -> None:
    from glyphforge.builds.reading.dataset import BuiltDataset
    from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
    from glyphforge.cache import CacheStore

    print(f"\n{n_examples:,} examples, bookkeeping only (an index, an empty data file; no rows are read):")
    print(f"{'shard size':>10s} {'shards':>8s} {'manifest':>9s} {'open+index':>11s} {'plan epoch':>11s} "
          f"{'plan memory':>12s}")
    for shard_size in (1000, 100):
        n_shards = -(-n_examples // shard_size)
        rows = np.full(n_shards, shard_size)
        rows[-1] = n_examples - shard_size * (n_shards - 1)
        index = ShardIndex.from_lengths(np.full(n_shards, 490_000), rows)
        store = CacheStore(scratch / f"sim-{shard_size}")
        with store.create("sim", {"shard_size": shard_size}) as writer:
            # a sparse data file of the size the index declares (a size the manifest's bounds accept; never read)
            with (writer.path / "arrays.pklz").open("wb") as data:
                data.truncate(n_shards * 490_000)
            index.write(writer.path / INDEX_FILE)
            writer.meta.update(n_examples=n_examples, n_shards=n_shards, metadata={}, images="images",
                               layout={"images": {"dtype": "|u1", "shape": [48, 48, 3]}})
        manifest = (store.get("sim", {"shard_size": shard_size}).path / "manifest.json").stat().st_size
        started = time.perf_counter()
        dataset = BuiltDataset(store.get("sim", {"shard_size": shard_size}))
        assert len(dataset.index) == n_shards  # reads and checks the index
        opened = time.perf_counter() - started
        stream = dataset.stream(256, rank=3, world_size=8, num_workers=4, worker=1)
        stream.plan(1)  # warm-up: numpy's first generator
        tracemalloc.start()
        started = time.perf_counter()
        plan = stream.plan(0)
        planned = time.perf_counter() - started
        memory = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert plan.n_rows == n_examples  # the global order: the same for every rank
        print(f"{shard_size:10,d} {n_shards:8,d} {manifest / 1e6:7.1f}MB {opened * 1000:9.0f}ms "
              f"{planned * 1000:9.1f}ms {memory / 1e6:10.1f}MB")


def rate(result: dict) -> str:
    return f"{result['per_s']:,.0f} ex/s, {result['seconds']:.1f} s, peak {result['mb']:.0f} MB"


def past_bound_rows(runs: list[dict]) -> list[tuple[str, str, str, bool | None]]:
    """The rows of issue 32's goals, from runs of (shards, copy, mmap random, mmap stream order), twice."""
    rows: list[tuple[str, str, str, bool | None]] = []
    for number, (shards, copy, mmap_random, mmap_stream) in enumerate(zip(*[iter(runs)] * 4, strict=True), 1):
        if copy["copy"] == "None":
            raise SystemExit("the stream found no decoded copy: the random takes should have made it")
        first, over, over_mmap = shards["first"] / shards["later"], copy["later"] / shards["later"], \
            copy["later"] / mmap_random["per_s"]
        rows += [
            (f"run {number}: stream from shards", f"later {shards['later']:,.0f} ex/s, peak {shards['mb']:.0f} MB",
             "<= 200 MB", shards["mb"] <= GOALS["past_mb"]),
            ("  first / later epoch", f"{first:.2f} (first {shards['first']:,.0f} ex/s)", ">= 0.8",
             first >= GOALS["first_epoch"]),
            ("stream from the decoded copy", f"later {copy['later']:,.0f} ex/s, peak {copy['mb']:.0f} MB",
             "<= 200 MB", copy["mb"] <= GOALS["past_mb"]),
            ("  copy / shards (later)", f"{over:.2f}x", ">= 1.5x", over >= GOALS["copy_over_shards"]),
            ("  copy first / later epoch", f"{copy['first'] / copy['later']:.2f}", "", None),
            ("mmap of export, random batches", f"{mmap_random['per_s']:,.0f} ex/s, peak {mmap_random['mb']:.0f} MB",
             "", None),
            ("  copy stream / mmap", f"{over_mmap:.2f}x", ">= 1.0x", over_mmap >= GOALS["copy_over_mmap"]),
            ("  the same in CPU time", f"{copy['later_cpu'] / mmap_random['cpu_per_s']:.2f}x", "(a loaded machine)",
             None),
            ("mmap, the stream's batches", f"{mmap_stream['per_s']:,.0f} ex/s, peak {mmap_stream['mb']:.0f} MB",
             "", None),
            ("  copy stream / that mmap", f"{copy['later'] / mmap_stream['per_s']:.2f}x", "", None),
        ]
    return rows


def parse_or_run_child(parser: argparse.ArgumentParser, steps: dict) -> argparse.Namespace | None:
    """The arguments, ``--workdir`` made; None in a child step (``--child NAME ARGS``): run, its result printed."""
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        print(json.dumps(steps[args.child](*rest)))
        return None
    args.workdir.mkdir(parents=True, exist_ok=True)
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--glyphs", choices=["emnist", "font"], default="emnist")
    parser.add_argument("--examples", type=int, default=500_000)
    parser.add_argument("--backgrounds", choices=["none", "hard"], default="none",
                        help="none: black scenes, the issue's workload (236 MB for 500,000); hard: real texture "
                             "crops, which gzip barely compresses (~6 KB a scene)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-read")
    parser.add_argument("--emnist-workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-emnist",
                        help="where bench_emnist.py keeps its synthetic full-size archive")
    parser.add_argument("--simulate", type=int, default=10_000_000, help="examples of the bookkeeping simulation")
    args = parse_or_run_child(parser, STEPS)
    if args is None:
        return
    data_dir = str(prepare(args))
    remove_decoded_copy(data_dir)
    getitem = run_step("getitem", data_dir)
    take = run_step("take", data_dir)
    stream = run_step("stream", data_dir)
    arrays = run_step("arrays", data_dir)
    export = run_step("export", data_dir, str(args.workdir / "export"))
    random_decode = run_step("random_decode", data_dir)
    random_first = run_step("random_first", data_dir)
    random_take = run_step("random_take", data_dir)
    random_getitem = run_step("random_getitem", data_dir)
    run_step("materialize", data_dir)
    past = [run_step(name, data_dir, *options) for _ in range(2) for name, options in (
        ("epochs", ["decode"]), ("epochs", ["auto"]), ("mmap", [str(args.workdir / "export"), "random"]),
        ("mmap", [str(args.workdir / "export"), "stream"]))]
    fresh(args.workdir / "export")  # the export step's (0.7 GB), no longer needed
    peers = []
    for module, name, label, write, goal in (
            ("webdataset", "webdataset", "WebDataset 1.0.2, shuffle 5000", write_webdataset, "over_webdataset"),
            ("litdata", "litdata", "litdata 0.2.76, 8 MB chunks", write_litdata, "over_litdata"),
            ("streaming", "mds", "MosaicML MDS 0.13.0, raw", write_mds, None)):
        if importlib.util.find_spec(module) is None:
            continue
        started = time.perf_counter()
        written = write(data_dir, args.workdir / name)
        print(f"{label}: {disk_mb(written):.0f} MB on disk in {written} (written in "
              f"{time.perf_counter() - started:.1f} s, or earlier)")
        peer = run_step(name, str(written))
        if any(peer[key] != stream[key] for key in ("examples", "pixels", "labels")):
            raise SystemExit(f"{label} read other data than the stream: {peer} vs {stream}")
        over = stream["per_s"] / peer["per_s"]
        met = None if goal is None else over >= GOALS[goal]
        peers += [(label, rate(peer), f"stream >= {GOALS[goal]:g}x" if goal else "", met),
                  (f"  stream / {label.split()[0]}", f"{over:.2f}x", "", None)]
    ratio = stream["per_s"] / arrays["per_s"]
    random_ratio = random_take["per_s"] / stream["per_s"]
    rows = [
        ("ds[i] cold", f"{getitem['cold_ms']:.1f} ms", "<= 50 ms", getitem["cold_ms"] <= GOALS["cold_ms"]),
        ("ds[i] warm (median)", f"{getitem['warm_ms'] * 1000:.0f} us", "<= 1 ms", getitem["warm_ms"] <= 1.0),
        ("take(16 random)", f"{take['take_s']:.3f} s, peak {take['take_mb']:.0f} MB", "<= 0.5 s, 300 MB",
         take["take_s"] <= GOALS["take_s"] and take["take_mb"] <= GOALS["take_mb"]),
        ("ds.arrays (reference)", rate(arrays), "", None),
        ("stream, shuffled epoch", rate(stream), ">= 80% of arrays, <= 400 MB",
         ratio >= GOALS["stream_ratio"] and stream["mb"] <= GOALS["stream_mb"]),
        ("  stream / arrays", f"{ratio:.2f}x", "", None),
        ("export", f"{export['export_mb_s']:.0f} MB/s of pixels ({export['export_s']:.1f} s), peak {export['mb']:.0f} "
                   "MB", ">= 200 MB/s", export["export_mb_s"] >= GOALS["export_mb_s"]),
        ("exported memmap, random row", f"{export['memmap_row_us']:.1f} us", "", None),
        ("random 256-row takes, decode", rate(random_decode), "(20 batches; the old way)", None),
        ("random takes, first epoch", rate(random_first), "(makes the decoded copy)", None),
        ("random takes, after 1st pass", rate(random_take), ">= 50% of stream, <= 600 MB",
         random_ratio >= GOALS["random_ratio"] and random_take["mb"] <= GOALS["random_mb"]),
        ("  random takes / stream", f"{random_ratio:.2f}x", "", None),
        ("ds[i] random, one by one", rate(random_getitem), ">= 20,000 rows/s",
         random_getitem["per_s"] >= GOALS["random_getitem"]),
        *peers,
        *past_bound_rows(past),
    ]
    print(f"\n{'access (fresh process each)':30s} {'measured':48s} {'goal':28s} met")
    for name, measured, goal, met in rows:
        print(f"{name:30s} {measured:48s} {goal:28s} {'' if met is None else ('yes' if met else 'NO')}")
    simulate(args.simulate, args.workdir)


if __name__ == "__main__":
    main()
