"""A stream's batches read from its entry's decoded copy: past the inflate bound, checked as random rows are.

Once an entry has a decoded copy (`glyphforge.builds.decoded_copy.life`, made by random access or
``ds.materialize()``), `~glyphforge.builds.stream.stream.ShardStream` gathers each batch's rows there
instead of inflating shards. The epochs, windows, batches and states are the stream's own:
it computes which row of the dataset each position of the epoch's order holds (the same
permutations), so a batch holds the same bytes either way and a state taken on one resumes on
the other.

Reading (`CopyReads`): each large array of the copy (the images) is memory-mapped once per
iteration, from the file the copy was opened on; a batch's rows are gathered from the map
into a batch array the stream reuses (`~glyphforge.builds.stream.windows.Windows.batch`),
then checked against its rows' CRC32s (`~glyphforge.builds.decoded_copy.rows.CopyArray.check_rows`:
one CRC32 of the batch against theirs combined), so what is served is what the copy's maker
recorded, whatever the file holds by then. The small arrays (labels) were read and checked
whole when the copy was opened. A batch's rows lie in one or two of the stream's windows (a
few shards: a few runs of rows of the file); once a window is done, the pages of its runs
are unmapped (``madvise(MADV_DONTNEED)``; the page cache keeps them), so resident memory
stays at about a window's rows whatever the copy's size (Linux maps a large folio of the page
cache around each fault: a map left alone would make the whole file resident within an
epoch). A file cut short since the copy was opened is refused before a row of it is read (a
map read past a file's end kills the process).

A failed check raises `DamagedCopyError`: the reader drops the copy with a WARNING
(``ShardReader.read_copy``), and the stream decodes the shards from that batch on (as a
resumed stream does, from the batch's first row).
"""
from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from glyphforge.builds.decoded_copy.rows import CopyArray, DamagedCopyError, DecodedCopy
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.builds.stream.plan import EpochPlan

__all__ = ["CopyReads"]

#: The dataset's rows of a window, in its order, and its pieces' row runs ``(first row, rows)``, by its number.
WindowRows = Callable[[int], tuple[np.ndarray, list[tuple[int, int]]]]
#: Makes the arrays of a batch of ``rows`` rows shaped as ``like``'s (`Windows.batch`).
MakeBatch = Callable[[dict[str, np.ndarray], int], dict[str, np.ndarray]]


@dataclass
class _Source:
    """One array of the copy as a batch gathers it: ``rows`` (a memory map, or the array in memory) as bytes."""

    array: CopyArray
    rows: np.ndarray
    """``(rows, row bytes)`` uint8."""
    map: mmap.mmap | None = None

    def gather(self, rows: np.ndarray, out: np.ndarray) -> None:
        """Copy rows ``rows`` into ``out`` (C-contiguous, of the array's dtype), checked when the array has row sums.

        Raises
        ------
        DamagedCopyError
            The file was cut short since the copy was opened, or a row differs from its checksum.
        """
        array = self.array
        if self.map is not None and array.fd is not None and os.fstat(array.fd).st_size < len(self.map):
            raise DamagedCopyError(array.path, "was cut short after the copy was opened")
        flat = out.reshape(len(rows), -1).view(np.uint8)
        self.rows.take(rows, axis=0, out=flat, mode="clip")  # rows are in range: "clip" is not buffered
        if array.sums is not None:
            array.check_rows(rows, flat)

    def release(self, runs: Iterable[tuple[int, int]]) -> None:
        """Unmap the pages of the row runs ``(first row, rows)`` (the page cache keeps them)."""
        if self.map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        width, offset = self.array.row_nbytes, self.array.offset
        for first, count in runs:
            begin = (offset + first * width) // mmap.PAGESIZE * mmap.PAGESIZE
            self.map.madvise(mmap.MADV_DONTNEED, begin, offset + (first + count) * width - begin)


def _source(array: CopyArray) -> _Source:
    """``array`` as a batch gathers it: mapped from its open file when it is read by rows, else as held."""
    if array.fd is None:
        assert array.whole is not None, "an array is in memory, mapped or read"
        return _Source(array, array.whole.reshape(len(array.whole), -1).view(np.uint8))
    try:
        mapped = mmap.mmap(array.fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as error:
        raise DamagedCopyError(array.path, f"cannot be mapped: {error}") from None
    size = array.shape[0] * array.row_nbytes
    if len(mapped) < array.offset + size:
        mapped.close()
        raise DamagedCopyError(array.path, "was cut short after the copy was opened")
    return _Source(array, np.ndarray((array.shape[0], array.row_nbytes), np.uint8, mapped, array.offset), mapped)


@dataclass
class CopyReads:
    """One iteration's reads of the decoded copy (see the module docstring); ``active`` until it has none.

    ``windows`` holds the row runs of each window the batches under way read, by number
    (`release`); the rows of those windows (in each window's order) lie in slots of one array,
    ``_slots``, so that a batch's rows are one `take` of it at its places shifted by their
    windows' ``_shift``.
    """

    reader: ShardReader
    active: bool | None = None
    """Whether the copy is read (None: not looked for yet; False: none, or it failed a check)."""
    windows: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    _plan: EpochPlan | None = None
    _slots: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.int64))
    """``(slots, rows of the plan's largest window)``: a held window's rows in its order, from the slot's start."""
    _slot: dict[int, int] = field(default_factory=dict)
    """The slot of each held window, by number."""
    _free: list[int] = field(default_factory=list)
    """The slots no window is held in."""
    _shift: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    """What turns a place of a held window into its row's index in ``_slots`` flat, by window number."""
    _held: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    """Whether each window of ``_plan`` is held, by number."""
    _behind: bool = False
    """Whether a held window has a later window of its part held (it is let go once no batch reads it)."""
    _copy: DecodedCopy | None = None
    _sources: dict[str, _Source] = field(default_factory=dict)
    _mapped: list[_Source] = field(default_factory=list)
    """The sources that are memory maps (whose pages `release` unmaps)."""
    _like: dict[str, np.ndarray] = field(default_factory=dict)
    """An empty array shaped as a row of each array (what `MakeBatch` is given)."""

    def batch_at(self, plan: EpochPlan, places: np.ndarray, numbers: np.ndarray, make_rows: WindowRows,
                 make: MakeBatch) -> dict[str, np.ndarray] | None:
        """The rows at ``places`` (in windows ``numbers``) of epoch ``plan``, as `batch`; None: read the shards.

        A batch reading a window not held yet first lets go of the windows it is done with
        (`EpochPlan.finished`: each part is read in order), then holds the new ones
        (``make_rows(number)``: their rows and row runs).
        """
        if self.active is None:  # is there a copy to read? (else no window's rows are worked out for it)
            self.active = self.reader.read_copy(lambda copy: True) is not None
        if not self.active:
            return None
        if plan is not self._plan:  # a new epoch: its windows go in the slots of the last one's, if as large
            self.release(list(self.windows))
            if self._slots.shape[1] != plan.largest:
                self._slots, self._free = np.empty((0, plan.largest), np.int64), []
            self._plan, self._shift = plan, np.zeros(len(plan.ends), np.int64)
            self._held = np.zeros(len(plan.ends), bool)
        if self._behind or not self._held[numbers].all():
            self._hold(plan, numbers, make_rows)
        return self.batch(self._slots.reshape(-1).take(places + self._shift[numbers]), make)

    def _hold(self, plan: EpochPlan, numbers: np.ndarray, make_rows: WindowRows) -> None:
        """Hold the windows ``numbers`` (those held and done with let go first), each in a free slot.

        A part's window is held until a batch reads none of it but a later one of its part:
        while two windows of a part are held, every batch looks for windows done with.
        """
        self.release(plan.finished(list(self.windows), numbers))
        width = self._slots.shape[1]
        for number in sorted(set(numbers[~self._held[numbers]].tolist())):  # (np.unique imports numpy.ma: 13 ms)
            rows, self.windows[number] = make_rows(number)
            if not self._free:  # one more slot (as many are kept as windows were held at once)
                self._slots = np.concatenate([self._slots, np.empty((1, width), np.int64)])
                self._free.append(len(self._slots) - 1)
            slot = self._slot[number] = self._free.pop()
            self._slots[slot, :len(rows)] = rows
            self._shift[number], self._held[number] = slot * width - plan.begin(number), True
        parts = plan.part[list(self.windows)].tolist()
        self._behind = len(set(parts)) < len(parts)

    def release(self, numbers: list[int]) -> None:
        """Let the windows ``numbers`` go (the batches went past them): their runs' pages are unmapped."""
        for done in numbers:
            runs = self.windows.pop(done)
            self._free.append(self._slot.pop(done))
            self._held[done] = False
            for source in self._mapped:
                source.release(runs)

    def batch(self, rows: np.ndarray, make: MakeBatch) -> dict[str, np.ndarray] | None:
        """Rows ``rows`` of every array, checked, in arrays from ``make``; None: no copy (read the shards).

        None from the first batch on when the entry has no copy (or the reader reads none,
        ``random_access="decode"``), and from the batch on which the copy fails a check (dropped
        with a WARNING by the reader).
        """
        if self.active:
            taken = self.reader.read_copy(lambda copy: copy.checked(lambda: self._take(copy, rows, make)))
            self.active = taken is not None
            return taken
        return None

    def _take(self, copy: DecodedCopy, rows: np.ndarray, make: MakeBatch) -> dict[str, np.ndarray]:
        if copy is not self._copy:
            self._copy, self._sources = copy, {name: _source(array) for name, array in copy.arrays.items()}
            self._mapped = [source for source in self._sources.values() if source.map is not None]
            self._like = {name: np.empty((0, *source.array.shape[1:]), source.array.dtype)
                          for name, source in self._sources.items()}
        out = make(self._like, len(rows))
        for name, source in self._sources.items():
            source.gather(rows, out[name])
        return out
