"""Streaming a built dataset: coverage across ranks and workers, even batch counts, determinism, memory, torch."""
from __future__ import annotations

import collections
import importlib.util
import itertools
import json
import pickle
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
import weakref
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from glyphforge.builds import build
from glyphforge.builds.reading.lookup import find_built
from glyphforge.builds.stream.plan import Cut
from glyphforge.builds.stream.state import LIMITS
from glyphforge.cache.declared import BLOCK_BYTES
from glyphforge.cache.entry import MissingEntryFileError
from glyphforge.cache.pklz import DamagedPklzError

from support.cli import run_here
from support.optional import NO_TORCH, NO_TORCHDATA
from support.specs import RowSpec, WideRowSpec


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("streams")


@pytest.fixture(scope="module")
def rows_1030(data_dir):
    """1,030 rows in 11 shards of 100 (the last of 30)."""
    return build(RowSpec(), data_dir=data_dir, progress=False)


@pytest.fixture(scope="module")
def rows_97(data_dir):
    """97 rows in 14 shards of 7 (the last of 6): an odd shard count."""
    return build(RowSpec(n_examples=97, shard_size=7), data_dir=data_dir, progress=False)


def rows_of(stream) -> list[np.ndarray]:
    """The ``row`` targets of each batch one iteration yields."""
    return [targets["row"] for _, targets in stream]


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("num_workers", [1, 2, 4])
@pytest.mark.parametrize("dataset", ["rows_1030", "rows_97"])
def test_every_row_once_per_epoch_across_ranks_and_workers_with_equal_batches_per_rank(
    request, dataset, world_size, num_workers
):
    ds = request.getfixturevalue(dataset)
    n = len(ds)
    per_rank = -(-n // world_size)
    batches_per_rank, seen = [], collections.Counter()
    for rank in range(world_size):
        rank_batches = 0
        for worker in range(num_workers):
            stream = ds.stream(16, seed=3, rank=rank, world_size=world_size, worker=worker, num_workers=num_workers)
            batches = rows_of(stream)
            assert len(batches) == len(stream)
            assert all(len(batch) == 16 for batch in batches[:-1])
            rank_batches += len(batches)
            seen.update(np.concatenate(batches).tolist() if batches else [])
        batches_per_rank.append(rank_batches)
        assert rank_batches == ds.stream(16, rank=rank, world_size=world_size).batches_per_rank
    assert len(set(batches_per_rank)) == 1 and batches_per_rank[0] == -(-per_rank // 16)
    assert set(seen) == set(range(n))  # every row ...
    assert sum(seen.values()) == per_rank * world_size  # ... once, plus the repeats that even out the ranks
    assert sum(count - 1 for count in seen.values()) == per_rank * world_size - n < world_size


@pytest.mark.parametrize("world_size", [2, 3])
def test_even_ranks_drop_yields_each_row_at_most_once(rows_1030, world_size):
    seen = collections.Counter()
    lengths = []
    for rank in range(world_size):
        stream = rows_1030.stream(50, rank=rank, world_size=world_size, even_ranks="drop", drop_last=True)
        batches = rows_of(stream)
        lengths.append(len(batches))
        assert all(len(batch) == 50 for batch in batches) and len(batches) == len(stream)
        seen.update(np.concatenate(batches).tolist())
    assert len(set(lengths)) == 1 and max(seen.values()) == 1
    assert len(seen) == lengths[0] * 50 * world_size


def test_uneven_shards_over_three_ranks_give_equal_batch_counts_and_len(rows_1030):
    """1,030 rows in shards of 100 over 3 ranks: 344 rows each (two repeats), 22 batches of 16."""
    for rank in range(3):
        stream = rows_1030.stream(16, rank=rank, world_size=3, epochs=2)
        assert len(stream) == 2 * 22 and len(rows_of(stream)) == 44 and stream.rows_per_rank == 344


def test_without_shuffle_one_rank_reads_in_order(rows_97):
    stream = rows_97.stream(10, shuffle=False)
    batches = rows_of(stream)
    assert np.array_equal(np.concatenate(batches), np.arange(97)) and [len(b) for b in batches][-1] == 7
    images, targets = next(iter(stream))
    assert np.array_equal(images, rows_97.take(np.arange(10))["images"]) and set(targets) == {"row", "name"}


def test_a_seed_gives_the_same_batches_and_other_seeds_and_epochs_differ(rows_1030):
    first = rows_of(rows_1030.stream(32, seed=7))
    assert all(np.array_equal(a, b) for a, b in zip(first, rows_of(rows_1030.stream(32, seed=7)), strict=True))
    other = np.concatenate(rows_of(rows_1030.stream(32, seed=8)))
    assert not np.array_equal(np.concatenate(first), other) and sorted(other) == list(range(1030))
    two = np.concatenate(rows_of(rows_1030.stream(32, seed=7, epochs=2)))
    assert np.array_equal(two[:1030], np.concatenate(first)) and not np.array_equal(two[:1030], two[1030:])
    assert sorted(two[1030:]) == list(range(1030))
    later = rows_1030.stream(32, seed=7)
    later.set_epoch(1)
    assert np.array_equal(np.concatenate(rows_of(later)), two[1030:])  # set_epoch reaches the second epoch's order


def test_shuffling_mixes_rows_only_within_a_window_of_blocks(rows_1030):
    # one lane (the lanes of a batch take turns: their parts' rows interleave); a shard of these rows is one block
    rows = np.concatenate(rows_of(rows_1030.stream(1030, seed=1, window=1, partitions=1, turns=1)))
    shards = rows // 100
    assert np.count_nonzero(np.diff(shards)) == 10  # window=1: each block's rows stay together (11 runs)
    assert sorted(rows) == list(range(1030)) and not np.array_equal(rows, np.sort(rows))  # shuffled within shards
    wide = np.concatenate(rows_of(rows_1030.stream(1030, seed=1, window=11))) // 100
    assert np.count_nonzero(np.diff(wide)) > 100  # one window of every shard: rows of all shards interleave


def test_the_batches_of_a_rank_do_not_depend_on_its_number_of_workers(rows_1030):
    """Worker w of 4 yields the rank's batches w, w + 4, ...: taken in turn they are the rank's batches in order."""
    whole = rows_of(rows_1030.stream(16, seed=2, rank=1, world_size=2))
    split = [rows_of(rows_1030.stream(16, seed=2, rank=1, world_size=2, worker=worker, num_workers=4))
             for worker in range(4)]
    assert [len(batches) for batches in split] == [9, 8, 8, 8] and len(whole) == 33
    in_turn = [split[number % 4][number // 4] for number in range(33)]
    assert all(np.array_equal(a, b) for a, b in zip(whole, in_turn, strict=True))


@pytest.mark.parametrize("world_size", [2, 3, 4, 6])
def test_the_global_order_does_not_depend_on_the_world_size(rows_1030, world_size):
    """A global batch of 48: the ranks' i-th batches, rank by rank, are the one-rank run's i-th batch."""
    one = rows_of(rows_1030.stream(48, seed=9, epochs=2))
    ranks = [rows_of(rows_1030.stream(48 // world_size, seed=9, epochs=2, rank=rank, world_size=world_size))
             for rank in range(world_size)]
    assert len(one) == 44 and all(len(batches) == 44 for batches in ranks)
    for number, batch in enumerate(one):
        joined = np.concatenate([batches[number] for batches in ranks])
        if len(batch) == 48:
            assert np.array_equal(joined, batch)
        else:  # the short last global batch (1030 = 21 * 48 + 22): split by position, short ranks repeat
            assert set(joined.tolist()) == set(batch.tolist()) and len(joined) == -(-22 // world_size) * world_size


def test_the_last_global_batch_repeats_each_short_ranks_own_first_row(rows_1030):
    """22 rows left over 4 ranks: parts of 5, 6, 5, 6 rows, each short rank repeats its own first row.

    Its own: a rank reads no lane but its own to make its rows even (decoding stays divided).
    """
    last = rows_of(rows_1030.stream(48, seed=9))[-1]
    shares = [rows_of(rows_1030.stream(12, seed=9, rank=rank, world_size=4))[-1] for rank in range(4)]
    assert [share.tolist() for share in shares] == [
        [*last[0:5], last[0]], last[5:11].tolist(), [*last[11:16], last[11]], last[16:22].tolist()]


def test_a_stream_pickles_small_and_iterates_in_another_process(rows_97, tmp_path):
    stream = rows_97.stream(8, seed=4, rank=1, world_size=2)
    payload = pickle.dumps(stream)
    assert len(payload) < 1000
    (tmp_path / "stream.pkl").write_bytes(payload)
    code = "import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); print(sum(len(t['row']) for _, t in s))"
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "stream.pkl")], capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "49"


@pytest.mark.parametrize(("options", "message"), [
    (dict(batch_size=0), "batch_size must be an integer >= 1 and <= 16777216, got 0"),
    (dict(rank=2, world_size=2), "rank must be an integer >= 0 and <= 1, got 2"),
    (dict(worker=4, num_workers=4), "worker must be an integer >= 0 and <= 3, got 4"),
    (dict(even_ranks="pad"), "even_ranks must be one of repeat, drop, got 'pad'"),
    (dict(world_size=200, even_ranks="drop"), "even_ranks='drop' leaves no row for each of 200 ranks"),
    (dict(window=0), "window must be an integer >= 1 and <= 1048576, got 0"),
])
def test_bad_stream_arguments_are_named(rows_97, options, message):
    options = {"batch_size": 4, **options}
    with pytest.raises(ValueError, match=message):
        rows_97.stream(options.pop("batch_size"), **options)


@pytest.mark.parametrize("name", ["batch_size", "seed", "epochs", "world_size", "num_workers", "window", "partitions",
                                  "turns"])
@pytest.mark.parametrize("value", ["bound", 10**9, 10**19])
def test_every_numeric_stream_option_past_its_bound_is_refused_at_once(rows_97, name, value):
    # issue 42, row 8: partitions=10**9 or turns=10**9 took memory without bound; 10**19 overflowed
    bound = LIMITS[name]
    value = bound + 1 if value == "bound" else value
    if value <= bound:  # a seed of 10**9 (or 10**19) is a seed
        assert len(rows_97.stream(4, **{name: value})) >= 1
        return
    options = {"batch_size": 4, name: value}
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"^{name} must be an integer >= [01] and <= {bound}, got {value}$"):
            rows_97.stream(options.pop("batch_size"), **options)
        assert tracemalloc.get_traced_memory()[1] < 1_000_000
    finally:
        tracemalloc.stop()
    if name not in ("batch_size", "world_size"):  # at its bound (with a batch of 4): a stream
        assert len(rows_97.stream(4, **{name: bound})) >= 1


def test_a_later_window_is_decoded_into_the_arrays_of_a_done_one_no_batch_views(rows_1030):
    stream = rows_1030.stream(50, seed=3, window=1, partitions=1, turns=1)  # one lane: its windows in turn
    assert stream.plan(0).ends[:3].tolist() == [100, 200, 300]  # one shard a window: 2 batches each
    first = None
    for number, (images, targets) in enumerate(stream):
        if number == 0:
            first = weakref.ref(images.base)
        if number == 1:  # the last batch of window 0, which the loop holds while window 1 is decoded: a copy
            assert images.base is not first() and images.base.shape[0] == 50 and targets["row"].base.shape == (50,)
        if number == 2:  # window 1: into window 0's arrays, which no batch views any more
            assert images.base is first() and targets["row"].base is not None
            break


def test_every_window_is_decoded_into_the_same_arrays_when_the_loop_drops_its_batches(rows_1030):
    # one lane of windows of 4 shards: 400 rows; the rows of window 0 end at 400
    stream = rows_1030.stream(50, seed=3, window=4, partitions=1, turns=1)
    ends = stream.plan(0).ends.tolist()
    owners, copies = set(), set()
    for number, (images, _) in enumerate(stream):
        start, end = number * 50, min(number * 50 + 50, ends[-1])
        if images.base.shape[0] == 50:  # a copy: the last batch of a window, or one across two
            assert any(start < stop <= end + 50 for stop in ends)
            copies.add(id(images.base))
        else:
            owners.add(id(images.base))
    # one set of arrays for the whole epoch's windows, two for its copies (the loop holds one while the next is
    # made): no fresh memory after the first window
    assert len(owners) == 1 and len(copies) == 2


def test_a_batch_held_is_never_overwritten_by_a_later_window(rows_1030):
    # every third batch is kept (images, targets and a part of its images), the others dropped: the windows no
    # batch holds are decoded into again, the held ones never
    expected = list(rows_1030.stream(50, seed=3, window=1))  # all held: every window in new arrays
    held = [(number, batch, batch[0][:7]) for number, batch in enumerate(rows_1030.stream(50, seed=3, window=1))
            if number % 3 == 0]
    bases = [batch[0].base for _, batch, _ in held]  # each held batch's arrays, never written again
    assert len(held) == 7 and len({id(base) for base in bases}) == 7
    assert same_batches([batch for _, batch, _ in held], [expected[number] for number, _, _ in held])
    assert all(np.array_equal(part, expected[number][0][:7]) for number, _, part in held)


def memory_owner(array: np.ndarray) -> Any:
    """The object owning ``array``'s memory: the array it views, or the one a buffer it views was taken of."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.base.obj if isinstance(array.base, memoryview) else array.base if array.base is not None else array


@pytest.mark.parametrize("batch", [40, 64])
def test_one_process_reading_every_part_decodes_its_windows_straight_into_batch_order(rows_1030, batch):
    # the default order (16 lanes x 2 turns) in one process: every batch is a run of the one buffer its windows are
    # decoded into in batch order (again and again over two epochs when the loop drops its batches), never a copy
    # out of the windows of its lanes; a batch the loop holds keeps its rows (every fifth is held here: the buffer
    # is left to them), and the batches are those of the order
    owners, expected = set(), []
    for images, targets in rows_1030.stream(batch, seed=3, epochs=2):
        owners.add(id(memory_owner(images)))
        expected.append((images.copy(), {name: row.copy() for name, row in targets.items()}))
    assert len(owners) == 1 and len(expected) == 2 * -(-1030 // batch)
    held = [(number, pair) for number, pair in enumerate(rows_1030.stream(batch, seed=3, epochs=2)) if number % 5 == 0]
    assert same_batches([batch for _, batch in held], [expected[number] for number, _ in held])
    ranks = [list(rows_1030.stream(batch // 2, seed=3, epochs=2, rank=rank, world_size=2)) for rank in range(2)]
    assert all(np.array_equal(np.concatenate([first[0], second[0]]), images)  # two ranks read windows, not in order
               for first, second, (images, _) in zip(*ranks, expected, strict=True))


def test_the_positions_of_places_invert_the_places_of_positions():
    for rows, size, lanes, turns in itertools.product([1, 97, 1030], [1, 7, 64, 2000], [1, 3, 8], [1, 2, 3]):
        cut = Cut(rows, size, lanes, turns)
        positions = np.arange(rows)
        assert np.array_equal(cut.positions(cut.places(positions)), positions), (rows, size, lanes, turns)


def test_the_places_of_a_run_of_positions_are_those_of_its_positions():
    # `run_places`, a rank's run of a full global batch in a few array operations, is `places` of each position
    for rows, size, lanes, turns in itertools.product([97, 1030], [1, 7, 64, 2000], [1, 3, 8], [1, 2, 3]):
        cut = Cut(rows, size, lanes, turns)
        for first, count in ((0, min(size, rows)), (rows // 2, 1), (max(rows - size - 5, 0), size), (size // 3, 5)):
            count = min(count, rows - first)
            expected = cut.places(np.arange(first, first + count))
            assert np.array_equal(cut.run_places(first, count), expected), (rows, size, lanes, turns, first, count)


def test_the_positions_of_a_run_of_one_part_are_those_of_its_places():
    # `run_positions`, a window's run of places in a few array operations, is `positions` of each place: runs at
    # each part's start, end (the short last batch's rows) and across its full and short rows
    for rows, size, lanes, turns in itertools.product([97, 1030], [1, 7, 64, 2000], [1, 3, 8], [1, 2, 3]):
        cut = Cut(rows, size, lanes, turns)
        for begin, end in itertools.pairwise(cut.starts.tolist()):
            for first, stop in ((begin, end), (begin, begin + 1), (end - 1, end), ((begin + end) // 2, end)):
                if begin <= first < stop <= end:
                    expected = cut.positions(np.arange(first, stop))
                    assert np.array_equal(cut.run_positions(first, stop - first), expected), (rows, size, lanes,
                                                                                             turns, first, stop)


def test_a_stream_iterated_again_decodes_into_the_arrays_of_its_last_iteration(wide_400):
    # the default order holds a window per part (16 here): the next iteration (the next epoch) decodes into the
    # first one's arrays, so it traces no window's memory again, and yields the same batches as a fresh stream
    stream, peaks, batches = wide_400.stream(100, seed=0), [], []
    for _ in range(2):
        tracemalloc.start()
        try:
            batches.append([(zlib.crc32(images), targets["row"].tolist()) for images, targets in stream])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    fresh = wide_400.stream(100, seed=0)
    fresh.set_epoch(1)
    assert batches[1] == [(zlib.crc32(images), targets["row"].tolist()) for images, targets in fresh] != batches[0]
    assert peaks[0] > wide_400.nbytes // 2 and peaks[1] < peaks[0] // 8, peaks


@dataclass
class BigSpec:
    """100,000 scenes-sized rows (48x48x3 uint8, 0.7 GB decoded) that compress well, in 100 shards."""

    n_examples: int = 100_000
    shard_size: int = 1000
    seed: int = 0
    kind: str = "test-big"

    def params(self) -> dict[str, Any]:
        return {"version": 1}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        images = np.broadcast_to(np.uint8(index % 251), (n, 48, 48, 3)).copy()
        return {"images": images, "labels": np.arange(n, dtype=np.int64) + index * self.shard_size}


def test_reading_and_streaming_never_import_numpy_ma(rows_1030):
    # np.unique imports numpy.ma (13-20 ms): a fresh process's first rows, epoch or resumed rest would pay it
    code = textwrap.dedent(f"""
        import sys
        import glyphforge as gf

        ds = gf.open_built({str(rows_1030.path)!r}, random_access="decode")
        ds.take([700, 5, 6, 1029]), ds[3]
        for stream in (ds.stream(64, seed=0), ds.stream(32, seed=0, rank=1, world_size=2),
                       ds.stream(64, seed=0, partitions=1, turns=1, window=3)):
            sum(len(images) for images, _ in stream)
        resumed = ds.stream(64, seed=0, resume=ds.stream(64, seed=0).state_after(12))
        sum(len(images) for images, _ in resumed)
        print("numpy.ma" in sys.modules, "numpy.random" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"], result.stdout  # the stream's shuffles did run


@pytest.mark.slow
def test_streaming_memory_stays_bounded_far_below_the_dataset(data_dir):
    dataset = build(BigSpec(), data_dir=data_dir, session="processes:2", progress=False)
    assert dataset.nbytes > 0.65e9
    code = textwrap.dedent(f"""
        from glyphforge.builds.reading.lookup import find_built

        def peak_kb():  # VmHWM: this process's own peak (ru_maxrss would start from pytest's)
            return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1])

        ds = find_built("test-big", {str(data_dir)!r})
        before = peak_kb()
        count = sum(len(labels["labels"]) for _, labels in ds.stream(256, seed=0))
        print(count, before // 1024, peak_kb() // 1024)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, before_mb, peak_mb = map(int, result.stdout.split())
    assert count == 100_000
    # 32 windows of a block (16 lanes x 2 turns) are ~32 MB decoded; 0.7 GB in all
    assert peak_mb - before_mb < 200, (before_mb, peak_mb)


@pytest.fixture(scope="module")
def wide_400(data_dir):
    """400 rows of 12 KB in one shard of 4.9 MB (5 blocks of 85 rows, the last of 60)."""
    return build(WideRowSpec(n_examples=400, shard_size=400), data_dir=data_dir, progress=False)


def first_batch_peak(stream) -> tuple[Any, int]:
    """The first batch ``stream`` yields, and the peak of memory traced while it was read."""
    tracemalloc.start()
    try:
        batch = next(iter(stream))
        return batch, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_window_is_decoded_without_a_decoded_shard_beside_it(wide_400):
    # each shard is inflated a block of rows at a time into one reused buffer, its rows placed from there: beside
    # the window only that block and the member's compressed bytes exist, never a decoded shard (fresh memory each)
    shard_bytes = wide_400.nbytes
    # one window of all 5 blocks
    (images, targets), peak = first_batch_peak(wide_400.stream(100, seed=0, window=5, partitions=1, turns=1))
    assert images.shape == (100, 64, 64, 3) and len(set(targets["row"].tolist())) == 100
    assert wide_400.nbytes <= peak < wide_400.nbytes + min(shard_bytes, 2 * BLOCK_BYTES), (peak, wide_400.nbytes)


def test_a_resumed_stream_touches_only_the_memory_of_the_rows_to_come_of_the_window_it_lands_in(data_dir):
    # one window of 4 shards of 1,000 rows (12 MB a shard); resumed after 3,000 of its rows: its arrays are sized
    # for the whole window (later windows are decoded into them) but only the 1,000 rows to come are written
    dataset = build(WideRowSpec(n_examples=4000, shard_size=1000, kind="test-wide-window"), data_dir=data_dir,
                    progress=False)
    shard_mb = dataset.nbytes / 4 / 2**20
    code = textwrap.dedent(f"""
        import numpy.random
        from glyphforge.builds.reading.lookup import find_built

        def peak_kb():  # VmHWM: this process's own peak
            return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1])

        ds = find_built("test-wide-window", {str(data_dir)!r})
        state = ds.stream(100, seed=0).state_after(30)
        ds.index
        before = peak_kb()
        images, targets = next(iter(ds.stream(100, seed=0, resume=state)))
        print(" ".join(map(str, targets["row"].tolist())), (peak_kb() - before) / 1024)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *rows, grown_mb = result.stdout.split()
    assert list(map(int, rows)) == list(dataset.stream(100, seed=0))[30][1]["row"].tolist()
    assert float(grown_mb) < 2.5 * shard_mb, (grown_mb, shard_mb)  # the whole window alone is 4 shards' worth


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason=NO_TORCH)


LOADERS = {"no workers": dict(num_workers=0), "fork": dict(num_workers=2, multiprocessing_context="fork"),
           "spawn": dict(num_workers=2, multiprocessing_context="spawn")}


@pytest.fixture(scope="module")
def loaded_after_torch(rows_97):
    """For each of `LOADERS`: the rows a DataLoader yields of a stream made before ``import torch`` (fresh process)."""
    code = textwrap.dedent(f"""
        import json, sys
        from glyphforge.builds.reading.lookup import find_built

        stream = find_built({rows_97.key!r}, {str(rows_97.path.parents[2])!r}).stream(8, seed=3)
        assert "torch" not in sys.modules
        import torch.utils.data

        rows = {{}}
        for name, options in {LOADERS!r}.items():
            try:
                loader = torch.utils.data.DataLoader(stream, batch_size=None, **options)
                rows[name] = [row for _, targets in loader for row in targets["row"].tolist()]
            except Exception as error:
                rows[name] = f"{{type(error).__name__}}: {{error}}"
        print(json.dumps(rows))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


@needs_torch
@pytest.mark.slow  # a fresh process imports torch and spawns two workers that import it too
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_stream_made_before_torch_is_imported_works_in_a_dataloader(loaded_after_torch, loader):
    # issue 42, row 7: it was no IterableDataset to torch: "TypeError: 'ShardStream' object is not subscriptable"
    rows = loaded_after_torch[loader]
    assert isinstance(rows, list), rows
    assert sorted(rows) == list(range(97))


@needs_torch
@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_torch_dataloader_with_workers_yields_every_row_once(rows_1030, start):
    import torch.utils.data

    stream = rows_1030.stream(16, seed=5)
    assert isinstance(stream, torch.utils.data.IterableDataset)
    assert type(rows_1030.stream(16)) is type(stream) and len(pickle.loads(pickle.dumps(stream))) == 65  # one class
    workers = 3 if start == "fork" else 2  # 3: more workers than turns, they share; a spawned one costs 3 s
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers, multiprocessing_context=start)
    rows = [np.asarray(targets["row"]) for _, targets in loader]
    assert len(rows) == len(stream) == len(loader) == 65
    assert sorted(np.concatenate(rows).tolist()) == list(range(1030))
    stream.set_epoch(0)  # the workers iterated copies; this one has not moved, but say so
    alone = torch.utils.data.DataLoader(stream, batch_size=None)
    without_workers = [np.asarray(targets["row"]) for _, targets in alone]
    assert all(np.array_equal(a, b) for a, b in zip(without_workers, rows, strict=True))  # the same, in order


def in_worker(batch) -> tuple[Any, Any, list[tuple[bool, bool]]]:
    """A DataLoader's ``collate_fn``: runs in the worker on each batch, before the batch is pickled to the loop.

    Returns the batch as torch's ``default_convert`` makes it and, for each tensor of it, whether
    it is in shared memory (then pickling copies nothing) and its storage is the batch's: one
    storage for all of the batch's tensors (one handle to send), of the batch's bytes (no view
    of a larger array).
    """
    import torch.utils.data

    images, targets = torch.utils.data.default_convert(batch)
    tensors = [array for array in (images, *targets.values()) if isinstance(array, torch.Tensor)]
    storage = images.untyped_storage()
    batch_bytes = sum(tensor.nbytes for tensor in tensors)
    return images, targets, [(tensor.is_shared(), tensor.untyped_storage().data_ptr() == storage.data_ptr()
                              and batch_bytes <= storage.nbytes() < batch_bytes + 64 * len(tensors))
                             for tensor in tensors]


@needs_torch
@pytest.mark.parametrize("source", ["shards", "decoded copy"])
def test_dataloader_workers_yield_batches_in_shared_memory_of_their_own_size(rows_1030, tmp_path, source):
    import torch.utils.data

    dataset = rows_1030.reopened(random_access="decode")
    if source == "decoded copy":
        dataset = build(RowSpec(), data_dir=tmp_path, progress=False)
        dataset.materialize()
        shards = dataset.path / "arrays.pklz"
        shards.write_bytes(bytes(shards.stat().st_size))  # only the copy can serve the workers
    expected = [(images.copy(), {name: array.copy() for name, array in targets.items()})
                for images, targets in dataset.stream(48, seed=3)]  # batches in a window and across two
    loader = torch.utils.data.DataLoader(dataset.stream(48, seed=3), batch_size=None, num_workers=2,
                                         multiprocessing_context="fork", collate_fn=in_worker)
    found = list(loader)
    assert [checks for _, _, checks in found] == [[(True, True)] * 2] * len(expected)  # images and rows
    for (images, targets, _), (want_images, want_targets) in zip(found, expected, strict=True):
        assert images.numpy().dtype == want_images.dtype and np.array_equal(images.numpy(), want_images)
        assert np.array_equal(targets["row"].numpy(), want_targets["row"])
        assert np.array_equal(targets["name"], want_targets["name"])  # strings: numpy, as default_convert leaves
    assert sorted(np.concatenate([targets["row"] for _, targets in expected]).tolist()) == list(range(1030))


# -- resuming -------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("start", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])  # spawn: ~12 s a case
@pytest.mark.parametrize("what", ["stream", "dataset"])
def test_an_entry_removed_before_a_dataloader_reads_it_is_named_through_the_workers(tmp_path, start, what):
    # issue 42, row 9: torch re-raises a worker's error as its class made from its text: it said "None". Under
    # "spawn" a worker unpickles the dataset, which opens the entry again, before torch catches errors: the worker
    # died with "exited unexpectedly"; there the dataset raises why at its first use (glyphforge.builds.reading.reopen)
    import torch.utils.data

    dataset = build(RowSpec(n_examples=97, shard_size=7), data_dir=tmp_path, progress=False)
    stream = dataset.stream(8, seed=3)
    assert run_here("glyphforge", "cache", "rm", dataset.key, "--data-dir", tmp_path).returncode == 0
    loader = (torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2, multiprocessing_context=start)
              if what == "stream" else
              torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context=start))
    with pytest.raises(MissingEntryFileError) as raised:
        list(loader)
    said = (f"is missing from the test-rows entry {dataset.key[:12]}" if start == "fork" else
            f"the built dataset {dataset.key[:12]} is no longer at {dataset.path}: was it removed from the cache?")
    assert said in str(raised.value)


def test_the_state_is_small_json_and_resuming_yields_exactly_the_batches_that_were_next(rows_1030):
    whole = rows_of(rows_1030.stream(16, seed=6, epochs=2))
    stream = rows_1030.stream(16, seed=6, epochs=2)
    batches = iter(stream)
    head = [next(batches)[1]["row"] for _ in range(70)]  # 65 batches an epoch: 5 into the second
    state = json.loads(json.dumps(stream.state_dict()))
    assert stream.state_after(70) == state  # a loop counting its steps over the stream itself says the same
    assert state == {"version": 3, "key": rows_1030.key, "seed": 6, "shuffle": True, "window": 1, "partitions": 16,
                     "turns": 2, "n_examples": 1030, "epoch": 1, "cut": 16, "since": None, "rows": 80, "base": 80,
                     "until": 2, "batch_size": 16, "world_size": 1}
    resumed = rows_1030.stream(16, seed=6, resume=state)
    assert len(resumed) == 60
    rest = rows_of(resumed)  # the rest of the iteration under way: up to the end of epoch 1
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))
    assert resumed.state_dict() == {**state, "epoch": 2, "rows": 0, "base": 0, "until": None}
    assert len(rows_of(resumed)) == 65  # iterated again: epoch 2, whole


def with_shards_zeroed(dataset, shards, tmp_path):
    """A copy of ``dataset``'s entry under ``tmp_path`` whose ``shards`` are overwritten with zeros (unreadable)."""
    copy = tmp_path / "cache"
    shutil.copytree(dataset.path, copy / dataset.path.relative_to(dataset.path.parents[1]))
    damaged = find_built(dataset.key, tmp_path)
    index = damaged.index
    with open(damaged.path / "arrays.pklz", "r+b") as data:
        for shard in shards:
            data.seek(int(index.offset[shard]))
            data.write(bytes(int(index.length[shard])))
    return damaged


def test_resuming_skips_the_consumed_windows_without_reading_them(rows_1030, tmp_path):
    """A copy of the entry whose consumed shards are overwritten with zeros still resumes."""
    options = dict(seed=4, window=2, partitions=2, turns=1)
    stream = rows_1030.stream(50, **options)
    plan = stream.plan(0)
    consumed = np.zeros(plan.n_rows, bool)  # 12 batches of 50: the first 300 places of each part
    consumed[plan.cut.places(np.arange(600))] = True
    done = [number for number in range(len(plan.ends)) if consumed[plan.begin(number):plan.ends[number]].all()]
    pieces = np.concatenate([np.arange(len(plan.shard))[plan.pieces(number)] for number in done])
    shards = set(plan.shard[pieces].tolist()) - set(np.delete(plan.shard, pieces).tolist())  # wholly in done windows
    assert len(done) == 2 and len(shards) == 3
    damaged = with_shards_zeroed(rows_1030, sorted(shards), tmp_path)
    with pytest.raises(DamagedPklzError):
        rows_of(damaged.stream(50, **options))
    state = stream.state_after(12)
    assert state["rows"] == 600
    rest = rows_of(damaged.stream(50, **options, resume=state))
    assert all(np.array_equal(a, b) for a, b in zip(rest, rows_of(stream)[12:], strict=True)) and len(rest) == 9


def test_resuming_in_order_skips_the_consumed_shards_of_the_landing_window(rows_1030, tmp_path):
    """Without shuffle, the shards of the window it lands in that hold no row to come are not read."""
    damaged = with_shards_zeroed(rows_1030, range(6), tmp_path)  # window 1 holds shards 4 to 7 (rows 400 to 799)
    stream = rows_1030.stream(50, shuffle=False)
    state = stream.state_after(13)
    assert state["rows"] == 650
    rest = rows_of(damaged.stream(50, shuffle=False, resume=state))
    assert np.array_equal(np.concatenate(rest), np.arange(650, 1030)) and len(rest) == 8


def same_batches(a, b) -> bool:
    """Whether two lists of ``(images, targets)`` batches hold the same arrays, batch by batch."""
    return len(a) == len(b) and all(
        np.array_equal(images, other_images) and targets.keys() == other_targets.keys()
        and all(np.array_equal(targets[name], other_targets[name]) for name in targets)
        for (images, targets), (other_images, other_targets) in zip(a, b, strict=True))


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 3)])
@pytest.mark.parametrize("steps", [3, 10, 22])  # batches of 40 rows: in window 0, at window 1's first row, in the last
def test_a_resumed_stream_yields_the_uninterrupted_batches_wherever_it_lands(rows_1030, shuffle, world_size,
                                                                            num_workers, steps):
    """Each rank's batches after ``steps`` (its workers' in turn): the images and targets of the uninterrupted run."""
    batch_size = 40 // world_size  # windows of 400, 400 and 230 rows
    state = rows_1030.stream(40, seed=6, shuffle=shuffle).state_after(steps)
    assert state["rows"] == 40 * steps
    for rank in range(world_size):
        options = dict(seed=6, shuffle=shuffle, rank=rank, world_size=world_size)
        whole = list(rows_1030.stream(batch_size, **options))
        workers = [list(rows_1030.stream(batch_size, worker=worker, num_workers=num_workers, resume=state, **options))
                   for worker in range(num_workers)]
        in_turn = [workers[number % num_workers][number // num_workers] for number in range(len(whole) - steps)]
        assert sum(map(len, workers)) == len(whole) - steps == 26 - steps
        assert same_batches(in_turn, whole[steps:])


@pytest.mark.parametrize(("saved_on", "resumed_on", "batch_size"), [(2, 3, 16), (4, 1, 64), (3, 2, 8)])
def test_a_state_saved_on_some_ranks_resumes_on_others_each_example_once(rows_1030, saved_on, resumed_on,
                                                                        batch_size):
    seen = collections.Counter()
    states = []
    for rank in range(saved_on):
        stream = rows_1030.stream(16, seed=1, rank=rank, world_size=saved_on)
        batches = iter(stream)
        seen.update(np.concatenate([next(batches)[1]["row"] for _ in range(7)]).tolist())
        states.append(stream.state_dict())
    assert states[0]["rows"] == 7 * 16 * saved_on and all(state == states[0] for state in states)  # one state
    per_rank = []
    for rank in range(resumed_on):
        rest = rows_of(rows_1030.stream(batch_size, seed=1, rank=rank, world_size=resumed_on, resume=states[0]))
        per_rank.append(len(rest))
        seen.update(np.concatenate(rest).tolist())
    left = 1030 - 7 * 16 * saved_on
    assert len(set(per_rank)) == 1 and set(seen) == set(range(1030))
    assert sum(seen.values()) - 1030 == -(-(left % (batch_size * resumed_on)) // resumed_on) * resumed_on - left % (
        batch_size * resumed_on) < resumed_on  # only the documented repeats of the last global batch


def test_the_same_global_batch_on_other_ranks_resumes_with_the_same_global_batches(rows_1030):
    """Saved on 2 ranks of 24, resumed on 4 ranks of 12: the union of the i-th batches is the uninterrupted one."""
    uninterrupted = rows_of(rows_1030.stream(48, seed=2))
    stream = rows_1030.stream(24, seed=2, rank=1, world_size=2)
    state = stream.state_after(5)
    ranks = [rows_of(rows_1030.stream(12, seed=2, rank=rank, world_size=4, resume=state)) for rank in range(4)]
    for number, batch in enumerate(uninterrupted[5:-1]):
        assert np.array_equal(np.concatenate([batches[number] for batches in ranks]), batch)


def test_iterating_again_starts_the_next_epoch_unless_set_epoch_says_otherwise(rows_97):
    two = rows_of(rows_97.stream(10, seed=3, epochs=2))
    stream = rows_97.stream(10, seed=3)
    first, second = rows_of(stream), rows_of(stream)
    assert all(np.array_equal(a, b) for a, b in zip(first + second, two, strict=True))
    stream.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(rows_of(stream), first, strict=True))
    stopped = iter(stream)
    next(stopped)
    stream.set_epoch(1)  # stopped early in epoch 1: set_epoch(1) goes on with it
    assert all(np.array_equal(a, b) for a, b in zip(rows_of(stream), second[1:], strict=True))


@pytest.mark.parametrize(("state", "message"), [
    ({"version": 9}, "not a stream state of format version 3"),
    # version 2: windows counted in shards, not blocks (another order, whatever the other fields say)
    (dict(version=2, seed=3, shuffle=True, window=1, partitions=16, turns=2, n_examples=97, epoch=0, cut=4, rows=0,
          base=0, batch_size=4, world_size=1), "not a stream state of format version 3"),
    (dict(version=3, seed=5, shuffle=True, window=1, partitions=16, turns=2, n_examples=97, epoch=0, cut=4, rows=0,
          base=0, batch_size=4, world_size=1), r"saved with seed 5 \(this stream: 3\): resuming would read another"),
    (dict(version=3, seed=3, shuffle=True, window=2, partitions=16, turns=2, n_examples=96, epoch=0, cut=4, rows=0,
          base=0, batch_size=4, world_size=1), r"window 2 \(this stream: 1\), n_examples 96 \(this stream: 97\)"),
    (dict(version=3, seed=3, shuffle=True, window=1, partitions=8, turns=1, n_examples=97, epoch=0, cut=4, rows=0,
          base=0, batch_size=4, world_size=1), r"partitions 8 \(this stream: 16\), turns 1 \(this stream: 2\)"),
])
def test_a_state_of_another_order_is_refused(rows_97, state, message):
    with pytest.raises(ValueError, match=message):
        rows_97.stream(4, seed=3, resume={**state, **({"key": rows_97.key} if "seed" in state else {})})


@needs_torch
def test_persistent_dataloader_workers_read_a_new_order_each_epoch(rows_1030):
    import torch.utils.data

    two = rows_of(rows_1030.stream(16, seed=8, epochs=2))
    loader = torch.utils.data.DataLoader(rows_1030.stream(16, seed=8), batch_size=None, num_workers=2,
                                         persistent_workers=True)
    epochs = [[np.asarray(targets["row"]) for _, targets in loader] for _ in range(2)]
    assert len(epochs[0]) == len(epochs[1]) == 65
    assert all(np.array_equal(a, b) for a, b in zip(epochs[0] + epochs[1], two, strict=True))


@needs_torch
@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("workers", [0, 3])
def test_a_loop_counting_its_steps_over_a_dataloader_resumes_on_other_workers(rows_1030, workers):
    import torch.utils.data

    whole = rows_of(rows_1030.stream(16, seed=2, rank=1, world_size=2))
    stream = rows_1030.stream(16, seed=2, rank=1, world_size=2)
    head = []
    for step, (_, targets) in enumerate(torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers), 1):
        head.append(np.asarray(targets["row"]))
        if step == 20:
            break
    state = stream.state_after(20)
    resumed = rows_1030.stream(16, seed=2, rank=1, world_size=2, resume=state)
    rest = [np.asarray(t["row"]) for _, t in torch.utils.data.DataLoader(resumed, batch_size=None, num_workers=2)]
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))


@pytest.mark.skipif(importlib.util.find_spec("torchdata") is None, reason=NO_TORCHDATA)
def test_torchdata_stateful_dataloader_resumes_each_worker_where_it_was(rows_1030):
    from torchdata.stateful_dataloader import StatefulDataLoader

    whole = rows_of(rows_1030.stream(16, seed=5, epochs=2))
    loader = StatefulDataLoader(rows_1030.stream(16, seed=5, epochs=2), batch_size=None, num_workers=2)
    head = []
    for _, targets in loader:
        head.append(np.asarray(targets["row"]))
        if len(head) == 71:  # 65 batches an epoch: 6 into the second
            break
    state = loader.state_dict()
    again = StatefulDataLoader(rows_1030.stream(16, seed=5, epochs=2), batch_size=None, num_workers=2)
    again.load_state_dict(state)
    rest = [np.asarray(targets["row"]) for _, targets in again]
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))
