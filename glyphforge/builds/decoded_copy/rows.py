"""Rows read from an opened decoded copy, each checked against the CRC32 its maker recorded before it is returned.

The copy was opened and checked by `glyphforge.builds.decoded_copy.life.open_copy`, which hands
each array over as a `CopyArray`: ``whole`` in memory (read and checked whole when the copy was
opened: the small arrays, labels and boxes), or read a row at a time with ``os.preadv`` from
``fd`` into the output (the images), each row checked against its recorded CRC32 (``sums``), a
batch with one CRC32 against its rows' combined (`glyphforge.builds.decoded_copy.crc_combine`).
The rows asked for are copied out, never viewed: a process's resident memory stays at the small
arrays plus the rows it was given, while the page cache (shared by every process of the machine)
serves the reads. A check that fails raises `DamagedCopyError` and returns nothing; the reader
then drops the copy (`glyphforge.builds.decoded_copy.life.drop_copy`) and reads the shards.

CRC32 is isal's where it is installed (several GB/s), else zlib's: the same values.
"""
from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
from isal.isal_zlib import crc32

from glyphforge.builds.decoded_copy.crc_combine import MOST, RowsCrc
from glyphforge.errors import IntegrityError, StorageError

__all__ = ["CopyArray", "DamagedCopyError", "DecodedCopy", "row_sums"]

T = TypeVar("T")
#: The CRC32s of rows laid end to end, by row width (`RowsCrc`: made on first use, a few ms; 128 KB each).
_rows_crc = lru_cache(maxsize=16)(RowsCrc)


class DamagedCopyError(StorageError, IntegrityError):
    """A file of a decoded copy is not what its maker recorded (``path``: that file, ``problem``: what is wrong).

    The copy is to be dropped. ``identity``: the copy directory's ``(st_dev, st_ino)`` when known, so that only
    that copy is dropped.
    """

    def __init__(self, path: Path, problem: str, identity: tuple[int, int] | None = None) -> None:
        super().__init__(f"{path} {problem}")
        self.path, self.problem, self.identity = path, problem, identity


def row_sums(rows: np.ndarray) -> np.ndarray:
    """The CRC32 of each row of ``rows``, a C-contiguous ``(count, row bytes)`` uint8 array."""
    return np.fromiter(map(crc32, rows), np.uint32, len(rows))


class CopyArray(NamedTuple):
    """One array of an opened copy: ``whole`` in memory (or a memory map), or read by ``os.preadv`` from ``fd``.

    ``path`` is its file, ``offset`` where its rows start there, ``shape`` its whole shape,
    ``row_nbytes`` the bytes of a row, ``crc`` the CRC32 of all its rows and ``sums`` each row's,
    checked as rows are read (None: ``whole`` was loaded and checked when the copy was opened).
    """

    path: Path
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    offset: int
    row_nbytes: int
    crc: int
    sums: np.ndarray | None = None
    fd: int | None = None
    whole: np.ndarray | None = None
    map: mmap.mmap | None = None

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Copies of rows ``rows`` (non-negative ints, any order), read in file order and checked.

        Raises
        ------
        DamagedCopyError
            A row differs from its checksum, or the file is cut short: nothing is returned.
        """
        size = self.row_nbytes
        if self.whole is not None:
            taken = self.whole[rows]
            if self.sums is not None:  # a memory map (no os.preadv here)
                self.check_rows(rows, taken.reshape(-1).view(np.uint8).reshape(len(rows), size))
            return taken
        assert self.fd is not None, "an array is in memory, mapped or read"
        flat = np.empty(len(rows) * size, np.uint8)
        view = flat.data
        order = np.argsort(rows, kind="stable")
        for position, row in zip(order.tolist(), rows[order].tolist(), strict=True):
            if os.preadv(self.fd, [view[position * size:(position + 1) * size]], self.offset + row * size) != size:
                raise DamagedCopyError(self.path, f"ends before row {row}: it was cut short after the copy was opened")
        self.check_rows(rows, flat.reshape(len(rows), size))
        return flat.view(self.dtype).reshape(len(rows), *self.shape[1:])

    def check_rows(self, rows: np.ndarray, found: np.ndarray) -> None:
        """Raise `DamagedCopyError` unless ``found`` (C-contiguous ``(rows, row bytes)`` uint8) are rows ``rows``.

        One CRC32 of each `MOST` rows, against the CRC32 their recorded ones make laid end to
        end (`RowsCrc`); where they differ, each row's CRC32, to name the row that changed.
        """
        assert self.sums is not None, "rows are checked where the array was not checked whole"
        combined = _rows_crc(self.row_nbytes)
        for first in range(0, len(rows), MOST):
            part, rows_found = rows[first:first + MOST], found[first:first + MOST]
            if crc32(rows_found) != combined.of(self.sums[part]):
                self.check(part, row_sums(rows_found))

    def check(self, rows: np.ndarray, found: np.ndarray) -> None:
        """Raise `DamagedCopyError` unless ``found`` are the checksums recorded for ``rows``."""
        assert self.sums is not None, "rows are checked where the array was not checked whole"
        bad = np.flatnonzero(found != self.sums[rows])
        if bad.size:
            raise DamagedCopyError(self.path, f"has row {rows[bad[0]]} changed since the copy was made (its "
                                              "checksum differs)")

    def read_into(self, out: np.ndarray) -> None:
        """Copy the whole array into ``out`` (C-contiguous, of its dtype and shape), in file order, and check it.

        Raises
        ------
        DamagedCopyError
            What was read differs from the array's checksum, or the file is cut short.
        """
        if self.whole is not None:
            out[...] = self.whole
        else:
            assert self.fd is not None, "an array is in memory, mapped or read"
            view, done = out.reshape(-1).view(np.uint8).data, 0
            while done < len(view):
                count = os.preadv(self.fd, [view[done:]], self.offset + done)
                if not count:
                    raise DamagedCopyError(self.path, "was cut short after the copy was opened")
                done += count
        if crc32(out.reshape(-1).view(np.uint8)) != self.crc:
            raise DamagedCopyError(self.path, "has changed since the copy was made (its checksum differs)")


def close_arrays(arrays: Iterable[CopyArray]) -> None:
    """Close the files ``arrays`` read rows from."""
    for array in arrays:
        if array.fd is not None:
            os.close(array.fd)


class DecodedCopy:
    """The arrays of an opened decoded copy (see the module docstring); rows are read with `take` and `row`.

    Every read is checked (`DamagedCopyError`: the copy is damaged, and nothing was returned).

    Parameters
    ----------
    path
        The copy's directory.
    arrays
        Each array, by name (their files are closed with the copy).
    identity
        The directory's ``(st_dev, st_ino)``: `~glyphforge.builds.decoded_copy.life.drop_copy` removes this copy,
        never one made since.
    """

    def __init__(self, path: Path, arrays: dict[str, CopyArray], identity: tuple[int, int]) -> None:
        self.path = path
        self.identity = identity
        self._arrays = arrays
        weakref.finalize(self, close_arrays, list(arrays.values()))

    @property
    def arrays(self) -> dict[str, CopyArray]:
        """Each array of the copy, by name: its file, layout and row checksums (the stream maps them)."""
        return dict(self._arrays)

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Return copies of rows ``rows`` (non-negative ints, any order) of every array."""
        return self.checked(lambda: {name: array.take(rows) for name, array in self._arrays.items()})

    def row(self, number: int) -> dict[str, Any]:
        """Return a copy of row ``number`` (a non-negative int) of every array."""
        rows = np.array([number])
        return self.checked(lambda: {name: array.take(rows)[0] for name, array in self._arrays.items()})

    def read_into(self, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Copy every array whole into ``out`` (by name: C-contiguous arrays of their dtypes and shapes); ``out``."""
        def read_all() -> dict[str, np.ndarray]:
            for name, array in self._arrays.items():
                array.read_into(out[name])
            return out

        return self.checked(read_all)

    def checked(self, read: Callable[[], T]) -> T:
        """``read()``, its `DamagedCopyError` naming this copy (``identity``)."""
        try:
            return read()
        except DamagedCopyError as error:
            error.identity = self.identity
            raise
