"""A stream's windows are counted in blocks of a shard: each part's pieces (a block's rows in it), permuted, in
windows of ``window`` blocks; the reader is asked for each piece's rows (to come) only (issue 46)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from glyphforge.builds import build
from glyphforge.builds.reading.index import ShardIndex
from glyphforge.builds.stream.plan import Order, plan_epoch
from glyphforge.builds.stream.stream import ShardStream
from glyphforge.cache.declared import block_rows

from support.specs import WideRowSpec


@pytest.fixture(scope="module")
def wide_1000(tmp_path_factory):
    """1,000 rows of 12 KB in 5 shards of 200, each in blocks of 85, 85 and 30 rows."""
    dataset = build(WideRowSpec(n_examples=1000, shard_size=200), data_dir=tmp_path_factory.mktemp("blocks"),
                    progress=False)
    assert block_rows(dataset.layout) == 85
    return dataset.reopened(random_access="decode")  # from the shards, whatever another test makes


def piece_rows(plan, index: ShardIndex) -> list[np.ndarray]:
    """The dataset's rows of each piece of ``plan``, in its order."""
    starts = index.start[plan.shard].astype(np.int64) + plan.first
    return [np.arange(start, start + count) for start, count in zip(starts.tolist(), plan.rows.tolist(), strict=True)]


#: Shard sizes (empty ones too) of the plans `test_each_row_is_in_one_piece_of_one_block...` checks, seeded.
SHARDS = [np.random.default_rng(number).integers(0, 41, np.random.default_rng(number).integers(1, 13))
          for number in range(4)]


@pytest.mark.parametrize(("counts", "block"), [(counts, block) for counts in SHARDS for block in (1, 4, 17, 64)])
def test_each_row_is_in_one_piece_of_one_block_and_a_window_holds_at_most_window_blocks(counts, block):
    for partitions, turns, window, batch, shuffle in itertools.product([1, 2, 5], [1, 3], [1, 2, 4], [1, 7, 50],
                                                                       [True, False]):
        check_plan(counts.tolist(), block, partitions, turns, window, batch, shuffle, seed=partitions * 2**40 + batch)


def check_plan(counts: list[int], block: int, partitions: int, turns: int, window: int, batch: int, shuffle: bool,
               seed: int) -> None:
    """Each row in one piece of one block, a window's pieces at most ``window`` of distinct blocks in one part, and
    every window of two epochs fits the arrays sized for the order's largest."""
    index = ShardIndex.from_lengths(np.ones(len(counts)), counts)
    plan = plan_epoch(index, Order(seed, shuffle, window, partitions, turns), 3, batch, block)
    rows = piece_rows(plan, index)
    together = np.concatenate([[], *rows]).astype(np.int64)
    assert np.array_equal(np.sort(together), np.arange(sum(counts)))  # each row once
    if not shuffle:
        assert np.array_equal(together, np.arange(sum(counts)))  # in order
    assert (plan.rows > 0).all() and (plan.first // block == (plan.first + plan.rows - 1) // block).all()
    assert (np.diff(plan.windows) <= window).all() and (np.diff(plan.windows) > 0).all()
    assert np.array_equal(plan.ends, np.cumsum(plan.rows)[plan.windows[1:] - 1])
    # the arrays of a window take every window of every epoch (an epoch's windows vary with the blocks they hold)
    later = plan_epoch(index, Order(seed, shuffle, window, partitions, turns), 4, batch, block)
    assert plan.largest == later.largest >= max(np.diff(plan.ends, prepend=0).max(initial=0),
                                                np.diff(later.ends, prepend=0).max(initial=0))
    for number in range(len(plan.ends)):  # a window: pieces of distinct blocks of one part
        pieces = plan.pieces(number)
        blocks = set(zip(plan.shard[pieces].tolist(), (plan.first[pieces] // block).tolist(), strict=True))
        assert len(blocks) == pieces.stop - pieces.start
        low, high = plan.begin(number), int(plan.ends[number])
        part = int(plan.part[number])
        assert plan.cut.starts[part] <= low < high <= plan.cut.starts[part + 1]


def test_blocks_cut_by_a_part_edge_give_a_piece_to_each_part():
    index = ShardIndex.from_lengths(np.ones(3), [10, 10, 10])
    plan = plan_epoch(index, Order(0, False, 1, 3, 1), 0, 3, 4)  # parts of 10 rows; blocks of 4, 4 and 2 rows
    assert plan.cut.starts.tolist() == [0, 10, 20, 30]
    assert list(zip(plan.shard.tolist(), plan.first.tolist(), plan.rows.tolist(), strict=True)) == [
        (0, 0, 4), (0, 4, 4), (0, 8, 2), (1, 0, 4), (1, 4, 4), (1, 8, 2), (2, 0, 4), (2, 4, 4), (2, 8, 2)]
    index = ShardIndex.from_lengths(np.ones(2), [10, 10])
    plan = plan_epoch(index, Order(0, False, 2, 3, 1), 0, 3, 4)  # parts of 6, 7 and 7 rows: 2 blocks cut
    assert plan.cut.starts.tolist() == [0, 6, 13, 20]
    assert list(zip(plan.shard.tolist(), plan.first.tolist(), plan.rows.tolist(), strict=True)) == [
        (0, 0, 4), (0, 4, 2), (0, 6, 2), (0, 8, 2), (1, 0, 3), (1, 3, 1), (1, 4, 4), (1, 8, 2)]
    assert plan.windows.tolist() == [0, 2, 4, 5, 7, 8] and plan.part.tolist() == [0, 1, 1, 2, 2]


@pytest.mark.parametrize(("world_size", "num_workers"), [(2, 1), (4, 2), (16, 1), (3, 2)])
def test_the_pieces_are_permuted_within_their_parts_whatever_the_ranks_and_workers(wide_1000, world_size,
                                                                                   num_workers):
    alone = ShardStream(wide_1000, 48, seed=9).plan(1)
    for rank in range(world_size):
        for worker in range(num_workers):
            plan = ShardStream(wide_1000, 48 // world_size if world_size != 3 else 16, seed=9, rank=rank,
                               world_size=world_size, worker=worker, num_workers=num_workers).plan(1)
            for name in ("shard", "first", "rows", "windows", "ends", "part"):
                assert np.array_equal(getattr(plan, name), getattr(alone, name)), name
    # pieces not in shard order: a part of 2 lanes' rows (one lane a turn) spans blocks permuted among them
    few = ShardStream(wide_1000, 48, seed=9, partitions=2, turns=1).plan(1)
    order = np.argsort(np.random.default_rng([9, 1]).permutation(5))[few.shard] * 1000 + few.first
    parts = np.repeat(few.part, np.diff(few.windows))
    assert any((np.diff(order[parts == part]) < 0).any() for part in range(2))
    assert (few.rows <= 85).all() and len(few.rows) > 15  # 15 blocks, some cut by the parts' edge


class RecordingReader:
    """A real reader (and those it reopens) recording the ``(shard, rows)`` each `read_blocks` call asks."""

    def __init__(self, reader, asked: list | None = None) -> None:
        self._reader, self.asked = reader, [] if asked is None else asked

    def __getattr__(self, name: str):
        return getattr(self._reader, name)

    def __len__(self) -> int:
        return len(self._reader)

    def reopened(self, **options) -> RecordingReader:
        return RecordingReader(self._reader.reopened(**options), self.asked)

    def read_blocks(self, number, put, scratch, rows=None) -> None:
        self.asked.append((number, rows))
        self._reader.read_blocks(number, put, scratch, rows)


#: One process reading every part (decoded into batch order), one lane of 3-block windows, a rank of two.
PATHS = [{}, {"partitions": 1, "turns": 1, "window": 3}, {"window": 2, "rank": 1, "world_size": 2}]


@pytest.mark.parametrize("options", PATHS)
def test_the_reader_is_asked_for_each_piece_s_rows_once(wide_1000, options):
    reader = RecordingReader(wide_1000)
    stream = ShardStream(reader, 40 // options.get("world_size", 1), seed=2, **options)
    yielded = np.concatenate([targets["row"] for _, targets in stream])
    plan = stream.plan(0)
    lanes = range(options.get("rank", 0) * plan.cut.lanes // stream.world_size,
                  (options.get("rank", 0) + 1) * plan.cut.lanes // stream.world_size)
    parts = np.repeat(plan.part, np.diff(plan.windows)) // plan.cut.turns
    pieces = [(shard, (first, first + count)) for shard, first, count, lane in
              zip(plan.shard.tolist(), plan.first.tolist(), plan.rows.tolist(), parts.tolist(), strict=True)
              if lane in lanes]
    assert sorted(reader.asked) == sorted(pieces)  # each piece of its lanes once, its rows only
    assert len(yielded) == 1000 // stream.world_size


@pytest.mark.parametrize("options", PATHS)
@pytest.mark.parametrize("steps", [4, 13])  # in the landing windows' first rows, and near the epoch's end
def test_a_resumed_stream_asks_only_for_rows_at_or_after_its_position(wide_1000, options, steps):
    size = 40 // options.get("world_size", 1)
    whole = ShardStream(wide_1000, 40, seed=2, partitions=options.get("partitions"), turns=options.get("turns"),
                        window=options.get("window", 1))
    position = np.empty(1000, np.int64)
    position[np.concatenate([targets["row"] for _, targets in whole])] = np.arange(1000)  # of each row
    state = ShardStream(wide_1000, size, seed=2, **options).state_after(steps)
    reader = RecordingReader(wide_1000)
    resumed = ShardStream(reader, size, seed=2, **options)
    resumed.load_state_dict(state)
    yielded = np.concatenate([targets["row"] for _, targets in resumed])
    index, start = wide_1000.index, steps * 40
    asked = [np.arange(index.start[shard] + first, index.start[shard] + stop) for shard, (first, stop) in reader.asked]
    assert all(position[rows[0]] >= start and position[rows[-1]] >= start for rows in asked)  # from a row to come ...
    assert set(yielded.tolist()) <= set(np.concatenate(asked).tolist())  # ... to a row to come, all it yields


def test_the_decoded_copy_streams_the_same_windows_of_blocks_and_resumes_on_them(wide_1000):
    copy = wide_1000.reopened(random_access="auto")
    copy.materialize()
    for options in ({"seed": 5}, {"seed": 5, "partitions": 1, "turns": 1, "window": 1}):
        expected = [(images.copy(), targets["row"].copy()) for images, targets in ShardStream(wide_1000, 10, **options)]
        reader = RecordingReader(copy)
        found = [(images.copy(), targets["row"].copy()) for images, targets in ShardStream(reader, 10, **options)]
        resumed = ShardStream(reader, 10, **options)
        resumed.load_state_dict(ShardStream(wide_1000, 10, **options).state_after(37))
        found += [(images.copy(), targets["row"].copy()) for images, targets in resumed]
        assert not reader.asked  # every batch from the copy ...
        assert len(found) == len(expected) + len(expected) - 37  # ... the batches of the shards, byte for byte
        for (images, rows), (want_images, want_rows) in zip(found, expected + expected[37:], strict=True):
            assert np.array_equal(images, want_images) and np.array_equal(rows, want_rows)
    first = found[0][1]  # one lane of windows of one block: the first batch's rows are of one block of one shard
    assert len(set((first // 200).tolist())) == 1 and len(set((first % 200 // 85).tolist())) == 1
