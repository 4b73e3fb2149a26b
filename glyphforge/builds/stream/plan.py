"""The global order of one epoch of a `~glyphforge.builds.stream.stream.ShardStream`: parts, pieces, windows.

An epoch's order is planned from the shard index and the rows of a shard's block alone (no
data is read) and depends only on the `Order` (seed, shuffle, window, partitions, turns), the
epoch, the block rows and the **global batch** ``G`` it is cut for, never on the ranks or
workers reading it:

1. **Parts.** The shards are permuted by ``default_rng([seed, epoch])`` (kept in order without
   ``shuffle``) and their rows, end to end, are cut into ``partitions * turns`` parts, each a
   run of that shard order. Part ``q = lane * turns + turn`` is *lane* ``lane`` of *turn*
   ``turn``.
2. **Pieces.** Each part's rows are cut at the block boundaries of their shards (a shard's
   block: ``block_rows`` rows, the last one of a shard maybe fewer, each inflatable alone): a
   *piece* is the rows of one block inside one part (a block cut by a part's edge gives a
   piece to each part). With ``shuffle`` the pieces of each part are permuted: they are
   ordered by keys drawn once per epoch by ``default_rng([seed, epoch, 0, 1])``, one a piece
   along the parts end to end, each part's pieces sorted by their keys (a uniform permutation
   of each part's pieces, whoever reads them). Without ``shuffle`` they stay in order.
3. **Windows.** Each part's pieces, in that order, are grouped into windows of ``window``
   pieces (so a window holds at most ``window`` blocks' rows) and window ``k``'s rows are
   permuted by ``default_rng([seed, epoch, k])`` (windows numbered along the parts end to end).
4. **Global batches.** Global batch ``j`` takes its rows from the lanes of turn ``j mod
   turns``, lane after lane: lane ``l`` gives the next ``c_l = floor((l + 1) G / L) - floor(l
   G / L)`` rows of its part (``L = partitions``). The last, short global batch (``g = N mod
   G`` rows) takes ``floor((l + 1) g / L) - floor(l g / L)`` rows of lane ``l``. The parts are
   sized so that every part runs out exactly with the epoch: each row comes once.

So rank ``r`` of ``R`` ranks dividing ``partitions`` (whose batch is the positions ``[r G / R,
(r + 1) G / R)`` of each global batch) reads only the lanes ``[r L / R, (r + 1) L / R)``, and
DataLoader worker ``w`` of ``W`` workers dividing ``turns`` (which yields every ``W``-th batch)
reads only the turns ``w, w + W, ...``: each process decodes about its share of the blocks.
Other numbers of ranks or workers read the same order, sharing the parts they split.

`EpochPlan` holds the plan: the pieces in part order, grouped into windows, and `Cut`, which
maps a position of the epoch's order to its place in the parts end to end (`EpochPlan.locate`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.random import default_rng  # imported with the module: a first epoch's clock does not pay it

from glyphforge.builds.reading.index import ShardIndex

__all__ = ["DEFAULT_PARTITIONS", "DEFAULT_TURNS", "DEFAULT_WINDOW", "Cut", "EpochPlan", "Order", "plan_epoch"]

#: Lanes of each global batch: world sizes dividing it split decoding exactly among the ranks.
DEFAULT_PARTITIONS = 16
#: Turns the global batches take in order: DataLoader workers (per rank) dividing it split decoding exactly.
DEFAULT_TURNS = 2
#: Blocks in a window of a part: what a part's shuffle mixes, and what a reader holds decoded per part.
DEFAULT_WINDOW = 1
#: The last words of the seed of an epoch's piece keys (`plan_epoch`): no window's seed ends so (``[seed, epoch, k]``
#: seeds as ``[seed, epoch, k, 0]``) nor the shards' (``[seed, epoch]``).
_PIECE_KEYS = (0, 1)


@dataclass(frozen=True)
class Order:
    """What an epoch's global order depends on besides the epoch and the global batch (a state must match it)."""

    seed: int
    shuffle: bool
    window: int
    partitions: int
    turns: int


@dataclass(frozen=True)
class Cut:
    """How the global batches of ``size`` rows of an epoch of ``n_rows`` rows take from its parts.

    ``lanes`` parts per global batch, ``turns`` groups of lanes taken in turn (the module
    docstring, rule 2).
    """

    n_rows: int
    size: int
    lanes: int
    turns: int

    @cached_property
    def _rates(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows each lane gives a full global batch, and the short last one."""
        lanes = np.arange(self.lanes + 1, dtype=np.int64)
        return np.diff(lanes * self.size // self.lanes), np.diff(lanes * (self.n_rows % self.size) // self.lanes)

    @cached_property
    def _divisors(self) -> np.ndarray:
        """Each lane's rows of a full global batch, at least 1 (what a part's offsets are divided by)."""
        return np.maximum(self._rates[0], 1)

    @cached_property
    def _edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where each lane's rows end and begin in a full global batch, and in the short last one."""
        full, short = self._rates
        full_ends, short_ends = np.cumsum(full), np.cumsum(short)
        return full_ends, full_ends - full, short_ends, short_ends - short

    @cached_property
    def starts(self) -> np.ndarray:
        """Part ``q`` holds the places ``[starts[q], starts[q + 1])`` of the parts end to end."""
        full, short = self._rates
        steps, tail_turn = divmod(self.n_rows // self.size, self.turns)
        per_turn = steps + (np.arange(self.turns) < tail_turn)  # the full global batches of each turn
        sizes = full[:, None] * per_turn[None, :]
        sizes[:, tail_turn] += short
        return np.concatenate([[0], np.cumsum(sizes.ravel())]).astype(np.int64)

    def places(self, positions: np.ndarray) -> np.ndarray:
        """The places, among the parts end to end, of ``positions`` of the epoch's order."""
        full = self._rates[0]
        full_ends, full_begins, short_ends, short_begins = self._edges
        batch, offset = np.divmod(positions, self.size)
        tail = batch >= self.n_rows // self.size
        if tail.any():
            lane = np.where(tail, np.searchsorted(short_ends, offset, side="right"),
                            np.searchsorted(full_ends, offset, side="right"))
            first = np.where(tail, short_begins[lane], full_begins[lane])
        else:  # every batch but the last
            lane = np.searchsorted(full_ends, offset, side="right")
            first = full_begins[lane]
        turn = batch % self.turns
        # the full global batches of this turn before this one (before the tail: all of that turn's)
        given = full[lane] * (batch // self.turns)
        return self.starts[lane * self.turns + turn] + given + offset - first

    @cached_property
    def _by_offset(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of each position of a full global batch: its lane, the rows its lane gives, its offset among them."""
        full = self._rates[0]
        lane = np.repeat(np.arange(self.lanes, dtype=np.int64), full)
        return lane, full[lane], np.arange(self.size, dtype=np.int64) - self._edges[1][lane]

    def run_places(self, first: int, count: int) -> np.ndarray:
        """`places` of the positions ``[first, first + count)`` (a handful of array operations within a full batch)."""
        batch, offset = divmod(first, self.size)
        if offset + count > self.size or batch >= self.n_rows // self.size:  # across batches, or in the short last
            return self.places(np.arange(first, first + count, dtype=np.int64))
        lane, rate, within = (array[offset:offset + count] for array in self._by_offset)
        step, turn = divmod(batch, self.turns)
        return self.starts[turn:-1:self.turns][lane] + (rate * step + within)

    def positions(self, places: np.ndarray) -> np.ndarray:
        """The positions of the epoch's order at ``places`` of the parts end to end (`places`'s inverse)."""
        part = np.searchsorted(self.starts, places, side="right") - 1
        lane, turn = np.divmod(part, self.turns)
        return self._positions(lane, turn, places - self.starts[part])

    def run_positions(self, first: int, count: int) -> np.ndarray:
        """`positions` of the places ``[first, first + count)``, all of one part (a window's: few array operations)."""
        part = int(np.searchsorted(self.starts, first, side="right")) - 1
        lane, turn = divmod(part, self.turns)
        offset = first - int(self.starts[part])
        return self._positions(lane, turn, np.arange(offset, offset + count, dtype=np.int64))

    def _positions(self, lane: np.ndarray | int, turn: np.ndarray | int, offset: np.ndarray) -> np.ndarray:
        """The positions of the rows ``offset`` of the parts of ``lane`` and ``turn`` (arrays alike, or one part's)."""
        rate = self._rates[0][lane]
        steps, tail_turn = divmod(self.n_rows // self.size, self.turns)
        in_full = rate * (steps + (turn < tail_turn))  # the part's rows in full global batches
        batch, within = np.divmod(offset, self._divisors[lane])
        positions = batch * (self.turns * self.size) + (turn * self.size + self._edges[1][lane]) + within
        tail = offset >= in_full  # the part's rows of the short last global batch
        if tail.any():
            short = self.n_rows // self.size * self.size + self._edges[3][lane]  # its first position of that batch
            positions = np.where(tail, short + offset - in_full, positions)
        return positions


@dataclass(frozen=True)
class EpochPlan:
    """The global order of one epoch: its pieces (rows of one block of a shard) in part order, grouped into windows."""

    shard: np.ndarray
    """The shard of each piece."""
    first: np.ndarray
    """The piece's first row within its shard."""
    rows: np.ndarray
    """The piece's rows."""
    windows: np.ndarray
    """Window ``k`` is the pieces ``[windows[k], windows[k + 1])``."""
    ends: np.ndarray
    """Window ``k`` holds the places ``[ends[k - 1], ends[k])`` of the parts end to end (``ends[-1] = 0``)."""
    part: np.ndarray
    """The part of each window."""
    cut: Cut
    largest: int
    """The most rows a window holds in any epoch of the order cut for the same global batch (``window`` blocks, or a
    whole part): what a window's arrays are sized for, so that those of one epoch take the next one's windows."""

    @property
    def n_rows(self) -> int:
        return self.cut.n_rows

    def begin(self, number: int) -> int:
        """The first place of window ``number``."""
        return int(self.ends[number - 1]) if number else 0

    @cached_property
    def reach(self) -> int:
        """The most positions from a window's first row to its last, in the epoch's order."""
        if not len(self.ends):
            return 0
        first = self.cut.positions(np.concatenate([[0], self.ends[:-1]]))
        return int((self.cut.positions(self.ends - 1) - first).max()) + 1

    def pieces(self, number: int) -> slice:
        """The pieces of window ``number``."""
        return slice(int(self.windows[number]), int(self.windows[number + 1]))

    def locate(self, positions: np.ndarray | range) -> tuple[np.ndarray, np.ndarray]:
        """The places of ``positions`` of the epoch's order among the parts end to end, and their windows."""
        if isinstance(positions, range):  # a run of positions (step 1)
            places = self.cut.run_places(positions.start, len(positions))
        else:
            places = self.cut.places(positions)
        return places, self.ends.searchsorted(places, side="right")

    def finished(self, held: list[int], numbers: np.ndarray) -> list[int]:
        """Of the windows ``held``, those a reader now at windows ``numbers`` is done with.

        A window is done once a batch reads a later window of its part (each part is read in order).
        """
        if not held:
            return []
        lowest = np.full(len(self.cut.starts) - 1, len(self.ends), np.int64)
        np.minimum.at(lowest, self.part[numbers], numbers)  # each part's first window the batch reads ...
        lowest[lowest == len(self.ends)] = -1  # ... a part it reads none of keeps its windows
        kept = np.asarray(held, np.int64)
        return kept[kept < lowest[self.part[kept]]].tolist()


def plan_epoch(index: ShardIndex, order: Order, epoch: int, global_batch: int, block_rows: int) -> EpochPlan:
    """Return the plan of ``epoch`` cut for global batches of ``global_batch`` rows (reads no data).

    ``block_rows``: the rows of each block of a shard (its last block may hold fewer).
    """
    counts = index.rows.astype(np.int64)
    shards = (default_rng([order.seed, epoch]).permutation(len(counts)) if order.shuffle
              else np.arange(len(counts))).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts[shards])]).astype(np.int64)
    cut = Cut(int(bounds[-1]), global_batch, order.partitions, order.turns)
    blocks = -(-counts[shards] // block_rows)  # of each shard, in shard order
    block = np.arange(int(blocks.sum()), dtype=np.int64) - np.repeat(np.cumsum(blocks) - blocks, blocks)  # in its shard
    block_starts = np.repeat(bounds[:-1], blocks) + block * block_rows
    edges = np.sort(np.concatenate([block_starts, cut.starts]))
    edges = edges[np.flatnonzero(np.diff(edges, prepend=-1))]  # each once (np.unique would import numpy.ma)
    low, high = edges[:-1], edges[1:]
    at = np.searchsorted(bounds, low, side="right") - 1
    part = np.searchsorted(cut.starts, low, side="right") - 1
    if order.shuffle:  # each part's pieces by their keys (the parts stay in order: `part` is sorted)
        keys = default_rng([order.seed, epoch, *_PIECE_KEYS]).random(len(low))
        permuted = np.lexsort((keys, part))
        low, high, at = low[permuted], high[permuted], at[permuted]
    rows = high - low
    new_part = np.flatnonzero(np.diff(part, prepend=-1))
    within = np.arange(len(low)) - np.repeat(new_part, np.diff(np.append(new_part, len(low))))
    windows = np.append(np.flatnonzero(within % order.window == 0), len(low)).astype(np.int64)
    ends = np.cumsum(rows)[windows[1:] - 1]
    largest = min(order.window * block_rows, int(np.diff(cut.starts).max()) if len(cut.starts) > 1 else 0)
    return EpochPlan(shards[at], low - bounds[at], rows, windows, ends, part[windows[:-1]], cut, largest)

