"""Decoding a `~glyphforge.builds.stream.stream.ShardStream`'s windows, and the memory it decodes them into and reuses.

A window (`decode_window`) is decoded piece by piece (a piece: the rows of one shard its part
holds), each shard a block of rows at a time (`Placer` puts the block's rows where the
window's shuffle puts them), into the arrays of a done window when no batch a consumer still
holds is a view of them (`Spare`), else into new ones. Batches that are copies are reused the
same way (`Windows.batch`), but in a DataLoader worker (`Windows.make`).
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from glyphforge.builds.reading.members import Scratch
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.builds.stream.plan import EpochPlan

__all__ = ["SPARE", "Placer", "Spare", "Window", "Windows", "decode_window"]

log = logging.getLogger(__name__)

#: Sets of a done window's arrays kept to decode later windows into (`Windows`).
SPARE = 2


@dataclass
class Window:
    """One decoded window: its rows in the epoch's order, from position ``begin`` of the epoch."""

    begin: int
    arrays: dict[str, np.ndarray]
    """Views of the first rows of ``owners``."""
    owners: dict[str, np.ndarray]
    """The arrays it was decoded into (reused once it is done: `Windows`)."""

    def copy_rows(self, place: int, out: dict[str, np.ndarray], start: int, stop: int) -> None:
        """Copy the rows from position ``place`` on into ``out[name][start:stop]``."""
        first = place - self.begin
        for name, array in self.arrays.items():
            out[name][start:stop] = array[first:first + stop - start]


@dataclass
class Spare:
    """Sets of arrays done with, kept to be written again once no batch a consumer holds is a view of them.

    Writing into arrays used before spares the fresh pages a new array faults in. Of more
    than ``keep`` sets the oldest is left to its batches.
    """

    keep: int
    sets: list[dict[str, np.ndarray]] = field(default_factory=list)

    def give(self, arrays: dict[str, np.ndarray]) -> None:
        """Keep ``arrays`` to be written again once nothing views them."""
        self.sets.append(arrays)
        del self.sets[:-self.keep]

    def take(self, rows: int) -> dict[str, np.ndarray]:
        """A kept set of ``rows`` rows or more that no batch views any more, by name (empty: none)."""
        for at, arrays in enumerate(self.sets):
            if min(map(len, arrays.values())) >= rows and max(_references(arrays)) == _ALONE:
                return self.sets.pop(at)
        return {}


@dataclass
class Windows:
    """An iteration's decoded windows (those the batch under way reads), and the memory it reuses.

    The arrays of done windows (`SPARE` sets) and of batches that are copies, each reused
    once no batch views them (`Spare`), and the scratch shards are inflated into.
    """

    decoded: dict[int, Window] = field(default_factory=dict)
    spare: Spare = field(default_factory=lambda: Spare(SPARE))
    copies: Spare = field(default_factory=lambda: Spare(SPARE + 1))
    scratch: Scratch = field(default_factory=Scratch)
    """The buffers shards are inflated into, a block of rows at a time, before their rows are placed."""
    make: Callable[[dict[str, np.ndarray], int], dict[str, np.ndarray]] | None = None
    """Makes every batch that is a copy instead, never reused (a DataLoader worker's: in shared memory)."""

    def release(self, numbers: list[int]) -> None:
        """Let the windows ``numbers`` go (the batches went past them): their arrays become spare.

        As many sets are kept as windows were held at once (at least `SPARE`): the windows of a
        new epoch (or iteration) are decoded into those of the last one, no fresh pages faulted in.
        """
        self.spare.keep = max(self.spare.keep, len(self.decoded))
        for done in numbers:
            self.spare.give(self.decoded.pop(done).owners)

    def batch(self, like: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Arrays of ``rows`` rows shaped as ``like``'s for a batch that is a copy (kept ones nothing views, or new)."""
        if self.make is not None:
            return self.make(like, rows)
        owners = self.copies.take(rows)
        for name, array in like.items():
            if name not in owners:
                owners[name] = np.empty((rows, *array.shape[1:]), array.dtype)
        self.copies.give(owners)
        return {name: owners[name][:rows] for name in like}


def _references(arrays: dict[str, np.ndarray]) -> list[int]:
    """``sys.getrefcount`` of each array of ``arrays``: a view of one (a batch, or a part of it) adds 1."""
    return [sys.getrefcount(array) for array in arrays.values()]


#: What `_references` counts for an array nothing but its dict refers to (counted here, not assumed).
_ALONE = _references({"alone": np.empty(0)})[0]


@dataclass(frozen=True)
class Placer:
    """Puts the blocks of one shard's arrays where the window's rows go in its ``arrays`` (`read_blocks`'s put).

    The window holds the shard's rows ``run`` (``(first, stop)``: all of them, or the part a
    part's edge leaves it); the others are skipped by slicing. ``places`` is each of those
    rows' place among the window's rows to come (negative: consumed, left out when
    ``partial``), or, for a window in shard order, the run's first row's place (an int).
    Arrays missing from ``arrays`` are made of ``size`` rows.
    """

    arrays: dict[str, np.ndarray]
    places: np.ndarray | int
    run: tuple[int, int]
    partial: bool
    size: int

    def __call__(self, name: str, first: int, block: np.ndarray) -> None:
        if name not in self.arrays:  # every shard has the same dtypes and shapes (the builder checks)
            self.arrays[name] = np.empty((self.size, *block.shape[1:]), block.dtype)
        out = self.arrays[name]
        low, high = max(self.run[0] - first, 0), min(self.run[1] - first, len(block))
        if low >= high:  # none of the window's rows
            return
        block, at = block[low:high], first + low - self.run[0]  # the block's rows of the run, from row `at` of it
        if isinstance(self.places, int):
            start = self.places + at
            skip = min(max(-start, 0), len(block))
            out[start + skip:start + len(block)] = block[skip:]
            return
        places = self.places[at:at + len(block)]
        if self.partial:
            kept = np.flatnonzero(places >= 0)
            if len(kept) < len(places):
                out[places[kept]] = block[kept]
                return
        out[places] = block


def decode_window(
    reader: ShardReader, plan: EpochPlan, number: int, first: int, windows: Windows,
    shuffle: Callable[[int, int], np.ndarray] | None,
) -> Window:
    """Decode the rows of window ``number`` of ``plan`` from place ``first`` on (all of them from its start).

    Piece by piece, each piece's rows put where the window's shuffle puts them
    (``shuffle(size, skip)``: each row's place among the rows from ``skip`` on; None: in
    order), into arrays of a done window when ``windows`` has some no batch views, else into
    new arrays sized for the epoch's largest window (later windows are decoded into them).
    The rows before ``first`` (consumed: the landing window of a resumed stream, or rows
    other workers yield) are left out (only the rows to come are written: the pages of the
    others are never touched), and a piece holding none of the rows to come is not read.
    Each shard read is logged at DEBUG (which shards a rank or worker reads).
    """
    begin = plan.begin(number)
    size, skip = int(plan.ends[number]) - begin, max(first - begin, 0)
    places = None if shuffle is None else shuffle(size, skip)
    owners = windows.spare.take(size - skip)
    pieces = plan.pieces(number)
    reader.prefetch(plan.shard[pieces.start:plan.windows[min(number + 2, len(plan.windows) - 1)]])
    at = 0
    for shard, start, count in zip(plan.shard[pieces].tolist(), plan.first[pieces].tolist(),
                                   plan.rows[pieces].tolist(), strict=True):
        targets = np.arange(at - skip, at - skip + count) if places is None else places[at:at + count]
        if targets[-1] >= 0 if places is None else bool((targets >= 0).any()):  # else: all consumed
            put: np.ndarray | int = targets if places is not None else at - skip
            log.debug("shard %d read (%d of its rows) for window %d", shard, count, number)
            placer = Placer(owners, put, (start, start + count), bool(skip), plan.largest)
            reader.read_blocks(shard, placer, windows.scratch)
        at += count
    return Window(begin + skip, {name: array[:size - skip] for name, array in owners.items()}, owners)
