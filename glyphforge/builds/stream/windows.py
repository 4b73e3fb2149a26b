"""Decoding a `~glyphforge.builds.stream.stream.ShardStream`'s windows, and the memory it decodes them into and reuses.

A window (`decode_window`) is decoded piece by piece (a piece: the rows of one block of a shard
its part holds, `glyphforge.builds.stream.plan`), the reader asked for the piece's rows to come
only (`ShardReader.read_blocks`' rows: the blocks holding them are inflated), a block of rows
at a time (`Placer` puts the block's rows where the window's shuffle puts them), into the
arrays of a done window when no batch a consumer still holds is a view of them (`Spare`), else
into new ones. Batches that are copies are reused the same way (`Windows.batch`), but in a
DataLoader worker (`Windows.make`). One process reading every part decodes them into a `Ring`
instead, in batch order.
"""
from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from glyphforge.builds.reading.members import Scratch
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.builds.stream.plan import EpochPlan

__all__ = ["SPARE", "Placer", "Ring", "Spare", "Window", "Windows", "decode_window"]

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
    ring: Ring | None = None
    """The windows in batch order of a process reading every part (made on first use, kept for the next iteration)."""

    def release(self, numbers: list[int]) -> None:
        """Let the windows ``numbers`` go (the batches went past them): their arrays become spare.

        As many sets are kept as windows were held at once (at least `SPARE`): the windows of a
        new epoch (or iteration) are decoded into those of the last one, no fresh pages faulted in.
        """
        self.spare.keep = max(self.spare.keep, len(self.decoded))
        for done in numbers:
            self.spare.give(self.decoded.pop(done).owners)

    def in_order(self, whole: bool) -> Ring | None:
        """The `Ring` of a process reading every part (``whole``; kept for its next iteration), else None."""
        if whole and self.ring is None:
            self.ring = Ring()
        return self.ring if whole else None

    def gather(
        self, plan: EpochPlan, places: np.ndarray, numbers: np.ndarray,
        later: Callable[[], tuple[np.ndarray, np.ndarray]], decode: Callable[[int, int, Windows], Window],
    ) -> dict[str, np.ndarray]:
        """Return the rows at ``places`` (in windows ``numbers``), decoding windows as needed.

        ``decode(number, first, self)`` decodes window ``number`` from place ``first`` on.

        Rows in one window are views of it, unless this iterator's next batch (in the windows
        ``later()[1]`` returns; none: the epoch ends) reads a later window of its part: then copies, so
        that the next window may be decoded into this one's arrays. Rows across windows are
        a copy, a run of rows of one window at a time, each window's rows taken before the
        next window of its part is decoded (into the arrays of the one before, when no batch
        views them).
        """
        self.release(plan.finished(list(self.decoded), numbers))
        decoded = self.decoded
        low, high = int(numbers.min()), int(numbers.max())
        if low == high:
            if low not in decoded:
                decoded[low] = decode(low, int(places.min()), self)
            window = decoded[low]
            local = places - window.begin
            first, last = int(local[0]), int(local[-1])
            rows: slice | np.ndarray = slice(first, last + 1) if last - first == len(local) - 1 else local
            views = {name: array[rows] for name, array in window.arrays.items()}  # a run of rows: views
            following = later()[1]
            if len(following) and not ((following > low) & (plan.part[following] == plan.part[low])).any():
                return views  # the next batch decodes no later window of this part
            out = self.batch(views, len(places))
            for name, view in views.items():
                out[name][:] = view
            return out
        cuts = np.flatnonzero((np.diff(numbers) != 0) | (np.diff(places) != 1)) + 1  # runs of rows of one window
        starts, stops = [0, *cuts.tolist()], [*cuts.tolist(), len(places)]
        last_run = {int(numbers[start]): run for run, start in enumerate(starts)}
        batch: dict[str, np.ndarray] = {}
        for run, (start, stop) in enumerate(zip(starts, stops, strict=True)):
            number = int(numbers[start])
            if number not in decoded:
                before = number - 1  # the window before in its part, taken already: its arrays may take this one
                if before in decoded and plan.part[before] == plan.part[number] and last_run.get(before, -1) < run:
                    self.release([before])
                decoded[number] = decode(number, int(places[numbers == number].min()), self)
            batch = batch or self.batch(decoded[number].arrays, len(places))
            decoded[number].copy_rows(int(places[start]), batch, start, stop)  # binds no window here: see release
        return batch

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
    new arrays sized for the order's largest window (`EpochPlan.largest`: later windows, of later epochs too, are
    decoded into them).
    The rows before ``first`` (consumed: the landing window of a resumed stream, or rows
    other workers yield) are left out (only the rows to come are written: the pages of the
    others are never touched), a piece holding none of the rows to come is not read, and of
    the others the reader is asked only from their first row to come to their last.
    Each shard read is logged at DEBUG (which shards a rank or worker reads).
    """
    begin = plan.begin(number)
    size, skip = int(plan.ends[number]) - begin, max(first - begin, 0)
    places = None if shuffle is None else shuffle(size, skip)
    owners = windows.spare.take(size - skip)
    reader.prefetch(plan.shard[plan.windows[number]:plan.windows[min(number + 2, len(plan.windows) - 1)]])
    _read_pieces(reader, plan, number, -skip if places is None else places, bool(skip), owners, plan.largest,
                 windows.scratch)
    return Window(begin + skip, {name: array[:size - skip] for name, array in owners.items()}, owners)


def _read_pieces(
    reader: ShardReader, plan: EpochPlan, number: int, places: np.ndarray | int, partial: bool,
    arrays: dict[str, np.ndarray], size: int, scratch: Scratch,
) -> None:
    """Read window ``number``'s pieces into ``arrays`` (those missing made of ``size`` rows): the window's rows at
    ``places`` (each row's place, or an int: its first row's, the rows in order; `Placer`).

    With ``partial`` (rows consumed, or other workers': placed below 0) a piece is asked of the reader from its first
    row to come to its last, and one holding none is not read. Each shard read is logged at DEBUG (which shards a
    rank or worker reads).
    """
    pieces, at = plan.pieces(number), 0
    for shard, first, count in zip(plan.shard[pieces].tolist(), plan.first[pieces].tolist(),
                                   plan.rows[pieces].tolist(), strict=True):
        put = places + at if isinstance(places, int) else places[at:at + count]
        if partial:
            needed = _span((np.arange(put, put + count) if isinstance(put, int) else put) >= 0)
        else:
            needed = (0, count)
        if needed is not None:  # else: all consumed
            log.debug("shard %d read (%d of its rows) for window %d", shard, count, number)
            placer = Placer(arrays, put, (first, first + count), partial, size)
            reader.read_blocks(shard, placer, scratch, (first + needed[0], first + needed[1]))
        at += count


def _span(kept: np.ndarray) -> tuple[int, int] | None:
    """From the first to one past the last of a piece's rows ``kept`` (True: to come), None when none is."""
    taken = np.flatnonzero(kept)
    return (int(taken[0]), int(taken[-1]) + 1) if len(taken) else None


@dataclass
class Ring:
    """The windows of one process reading every part, decoded straight into batch order.

    A window's rows are placed at their positions of the epoch's order (`Cut.positions`),
    counted across epochs, modulo ``rows``, so a batch is a run of the ring: no copy out of
    the windows its rows come from. The ring holds every row decoded and not yet read: a
    window is decoded when a batch first reads it, and its last row is at most `Cut.span`
    global batches on. A batch is a view of the ring with a base of its own (each view made
    of it, and each tensor sharing it, keeps it alive): before rows are written where a
    batch the consumer still holds lies, the ring is left to it and a copy goes on.
    """

    rows: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    shift: int = 0
    """What a position of the epoch under way adds to count across epochs."""
    high: int = 0
    """One past the highest position counted across epochs written or read."""
    decoded: set[int] = field(default_factory=set)
    """The epoch's windows decoded."""
    lent: list[tuple[int, weakref.ref]] = field(default_factory=list)
    """The batches handed out: their first position across epochs, and the batch."""
    scratch: Scratch = field(default_factory=Scratch)
    plan: EpochPlan | None = None
    """The epoch under way."""

    def begin(self, plan: EpochPlan, start: int, size: int) -> None:
        """Start reading ``plan``'s epoch in batches of ``size`` positions from ``start`` (older rows are all read)."""
        self.plan = plan
        rows = -(-plan.reach // size) * size + 2 * size  # a window's rows from the batch that decodes it, and one more
        if rows > self.rows:  # the old arrays are left to the batches that view them
            self.rows, self.arrays, self.lent = rows, {}, []
        self.shift = -(-self.high // size) * size - start  # each batch a run of the ring (`rows` is a multiple of size)
        self.decoded = set()

    def batch(
        self, reader: ShardReader, plan: EpochPlan, start: int, size: int, numbers: np.ndarray,
        local: Callable[[int, int], np.ndarray],
    ) -> dict[str, np.ndarray]:
        """The batch at positions ``[start, start + len(numbers))`` (in windows ``numbers``), decoding as needed.

        Batches are ``size`` positions apart; ``local(number, rows)`` is where each row of window
        ``number`` (``rows`` rows in shard order) goes among its rows.
        """
        if plan is not self.plan:
            self.begin(plan, start, size)
        for number in sorted(set(numbers.tolist())):  # (np.unique would import numpy.ma: 20 ms a fresh process)
            if number not in self.decoded:
                self._decode(reader, plan, number, start, local)
        count = len(numbers)
        at = (start + self.shift) % self.rows
        self.high = max(self.high, start + self.shift + count)
        self.lent = [(first, ref) for first, ref in self.lent if ref() is not None]
        out = {}
        for name, array in self.arrays.items():
            view = np.asarray(array.data[at:at + count])  # its base is not the ring: its views keep it alive
            self.lent.append((start + self.shift, weakref.ref(view)))
            out[name] = view
        return out

    def _decode(
        self, reader: ShardReader, plan: EpochPlan, number: int, start: int, local: Callable[[int, int], np.ndarray]
    ) -> None:
        """Place window ``number``'s rows at or after position ``start`` where the batch order puts them.

        Each piece is asked of the reader from its first row to place to its last (none: not read).
        """
        begin = plan.begin(number)
        size = int(plan.ends[number]) - begin
        positions = plan.cut.run_positions(begin, size)[local(number, size)]
        last = int(positions.max()) + self.shift
        if any(first + self.rows <= last for first, ref in self.lent if ref() is not None):
            self.arrays = {name: array.copy() for name, array in self.arrays.items()}  # the old ones: the consumer's
            self.lent = []
        slots = (positions + self.shift) % self.rows
        partial = int(positions.min()) < start  # rows read already: only a resumed stream's landing window has some
        if partial:
            slots[positions < start] = -1
        reader.prefetch(plan.shard[plan.pieces(number)])
        _read_pieces(reader, plan, number, slots, partial, self.arrays, self.rows, self.scratch)
        self.decoded.add(number)
