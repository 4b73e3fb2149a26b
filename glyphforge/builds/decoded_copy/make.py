"""A built dataset's decoded copy: its arrays as uncompressed ``.npy`` files, for random rows at memory speed.

Random rows of ``arrays.pklz`` cost a whole shard's decoding each; rows of a decoded
copy cost a read of their own bytes (from the page cache, once warm). The copy is made once per machine (per cache)
and read by every process that opens the entry, DataLoader workers included.

Layout: ``<root>/<kind>/<key>.decoded/`` beside the entry (`glyphforge.builds.decoded_copy.record.decoded_dir`),
holding what ``ds.export`` writes (`glyphforge.builds.export.files.write_npy_files`): one
``<array name>.npy`` per array and ``metadata.json``; and its checks (`glyphforge.builds.decoded_copy.record`):
each array's row checksums ``<array name>.crc32.npy`` and the record ``checks.json`` (every
file's size and sha256). The cache store treats it as part of
its entry: ``glyphforge cache rm`` and eviction remove it with the entry (eviction counts
its bytes), a replaced entry loses it, ``glyphforge cache gc`` removes one whose entry is
gone and the staging of a maker that died, ``glyphforge cache verify`` re-hashes it.

Making it (`make_copy`):

* One maker at a time: the file lock ``<root>/<kind>/.<key>.decoded.lock``; a process
  that finds it held waits (logging who holds it, see `glyphforge.cache.locks.hold`), then
  uses the copy the holder made.
* Staged, then published: written and recorded in ``<root>/<kind>/.tmp-<key>.decoded-<random>/``
  and renamed into place, so a ``<key>.decoded`` directory is always a whole copy; a maker
  killed half-way leaves only its staging, which the next maker (or ``gc``) removes.
* Modes follow the umask (`glyphforge._files.make_temp_dir`, plain ``open``).
* Only with room: the copy must leave `RESERVE_FRACTION` of its disk free, else
  `NotEnoughSpaceError` before anything is written. (How much an automatic copy may take:
  `glyphforge.builds.decoded_copy.source`.)
* Only glyphforge's: a ``<key>.decoded`` that is a symbolic link, a file, or a folder without
  a record (``checks.json``, which every copy glyphforge publishes holds) raises
  `ForeignCopyError`; nothing is read from it, written or removed there.

Reading (`DecodedCopy`): the rows asked for are copied out, never viewed, and checked before
they are returned. Arrays of at most `LOAD_LIMIT` bytes (labels, boxes) are read whole when
the copy is opened and checked against their CRC32 once; larger ones (the images) are read a
row at a time with ``os.preadv`` into the output, each row checked against its CRC32 (their
file's own CRC32 checked against the record when the copy is opened, so rows and checksums
replaced together are refused too; a
memory map of them would not do: Linux maps a large folio of the page cache around each
fault, over a megabyte a row was measured, so random rows would make the whole file resident
within an epoch; and a map serves whatever the file holds by then). So a process's resident
memory stays at the small arrays plus the rows it was given, while the page cache (shared
by every process of the machine) serves the reads. A check that fails raises
`DamagedCopyError` (nothing is returned); the reader then drops the copy (`drop_copy`) and
reads the shards.
"""
from __future__ import annotations

import errno
import io
import logging
import mmap
import os
import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import filelock
import numpy as np

from glyphforge import config
from glyphforge._files import make_temp_dir, remove_tree, writing
from glyphforge.builds.decoded_copy.crc_combine import MOST, RowsCrc
from glyphforge.builds.decoded_copy.record import (
    DamagedCopyError,
    ForeignCopyError,
    crc32,
    decoded_dir,
    decoded_staging_prefix,
    foreign,
    identity,
    npy_layout,
    read_checks,
    record_copy,
    row_nbytes,
    row_sums,
    sums_file,
)
from glyphforge.builds.export.files import write_npy_files
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.cache.companion_record import RECORD, recorded
from glyphforge.cache.entry import Entry
from glyphforge.cache.locks import LockTimeoutError, hold
from glyphforge.errors import StorageError
from glyphforge.textfmt import human_size

__all__ = ["CopyArray", "DamagedCopyError", "DecodedCopy", "ForeignCopyError", "NotEnoughSpaceError", "check_room",
           "copy_nbytes", "drop_copy", "make_copy", "open_copy"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_REMOVED = "removed it (glyphforge's own copy; the entry itself is intact)"

#: What a ``<key>.decoded`` directory without a record is: not glyphforge's (see `glyphforge.cache.companions`).
_UNRECORDED = f"a folder without {RECORD} (the record glyphforge writes last into each copy it makes)"
#: The part of its disk a decoded copy must leave free.
RESERVE_FRACTION = 0.05
#: The largest array of a copy that a reader loads whole (and checks once); larger ones are read row by row.
LOAD_LIMIT = 64 << 20


class NotEnoughSpaceError(StorageError):
    """A decoded copy would not fit on its disk with `RESERVE_FRACTION` of it left free; nothing was written."""


@dataclass(frozen=True)
class CopyArray:
    """One array of a copy: ``whole`` in memory (or a memory map), or read by ``os.preadv`` from ``fd``.

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

    @cached_property
    def rows_crc(self) -> RowsCrc:
        """The CRC32s of its rows laid end to end, from ``sums`` (made on first use: a few ms)."""
        return RowsCrc(self.row_nbytes)

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
        for first in range(0, len(rows), MOST):
            part, rows_found = rows[first:first + MOST], found[first:first + MOST]
            if crc32(rows_found) != self.rows_crc.of(self.sums[part]):
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

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


class DecodedCopy:
    """The arrays of a decoded copy (see the module docstring); rows are read with `take` and `row`.

    Every read is checked (`DamagedCopyError`: the copy is damaged, and nothing was returned).

    Parameters
    ----------
    path
        The copy's directory.
    arrays
        Each array, by name.
    identity
        The directory's ``(st_dev, st_ino)``: `drop_copy` removes this copy, never one made since.
    """

    def __init__(self, path: Path, arrays: dict[str, CopyArray], identity: tuple[int, int]) -> None:
        self.path = path
        self.identity = identity
        self._arrays = arrays
        weakref.finalize(self, _close, list(arrays.values()))

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


def _close(arrays: list[CopyArray]) -> None:
    for array in arrays:
        array.close()


def open_copy(entry: Entry, layout: dict[str, Any], n_examples: int) -> DecodedCopy | None:
    """Return the decoded copy of ``entry``, or None when it has none.

    Its record is read and every file's size checked (`read_checks`); arrays of at most
    `LOAD_LIMIT` bytes are read whole and checked, larger ones opened for reading rows.

    Parameters
    ----------
    entry
        A built dataset's cache entry.
    layout
        Each array's ``{"dtype", "shape"}`` (per example), as the entry's manifest records it.
    n_examples
        The number of rows every array must have.

    Raises
    ------
    ForeignCopyError
        ``<key>.decoded`` is not glyphforge's (a link, a file, a folder without its record): nothing was read from it.
    DamagedCopyError
        The copy is not what its maker recorded (see `glyphforge.builds.decoded_copy.record`).
    """
    path = decoded_dir(entry.path)
    what = foreign(path) or (_UNRECORDED if path.is_dir() and not recorded(path) else None)
    if what is not None:
        raise ForeignCopyError(
            f"{path} is {what}, not glyphforge's decoded copy of {entry.kind} {entry.key[:12]}: glyphforge neither "
            "reads from it nor writes or removes anything there. Move it away or remove it (`rm` of a link leaves "
            "its target as it is), then call ds.materialize() to make the copy; or read rows with "
            "random_access='decode', which needs no copy")
    found = identity(path)
    if found is None:
        return None
    arrays: dict[str, CopyArray] = {}
    try:
        record = read_checks(path, entry.key)
        for name, info in layout.items():
            arrays[name] = _open_array(path, name, (n_examples, *info["shape"]), record)
    except DamagedCopyError as error:
        _close(list(arrays.values()))
        error.identity = found
        raise
    except BaseException:
        _close(list(arrays.values()))
        raise
    return DecodedCopy(path, arrays, found)


def _open_array(folder: Path, name: str, shape: tuple[int, ...], record: dict[str, Any]) -> CopyArray:
    """Open array ``name`` of the copy in ``folder`` for reading rows (see `open_copy`).

    Raises
    ------
    DamagedCopyError
        It is not an array of ``shape`` as the copy's ``record`` describes it, or not its checksum; or its row
        checksums are not those the record holds (`_row_sums`).
    """
    path, recorded = folder / f"{name}.npy", record["arrays"].get(name)
    try:
        with open(path, "rb") as stream:
            found, dtype, offset = npy_layout(stream)
            if (found != shape or not isinstance(recorded, dict) or recorded.get("offset") != offset
                    or recorded.get("row_nbytes") != row_nbytes(shape, dtype)):
                raise ValueError(f"not the array of shape {shape} its record describes")
            crc, width = int(recorded["crc32"]), int(recorded["row_nbytes"])
            data = shape[0] * width
            if data <= LOAD_LIMIT:
                whole = np.empty(shape, dtype)
                if stream.readinto(whole.reshape(-1).view(np.uint8).data) != data:
                    raise ValueError("cut short")
                if crc32(whole.reshape(-1).view(np.uint8)) != crc:
                    raise ValueError("changed since the copy was made (its checksum differs)")
                return CopyArray(path, dtype, shape, offset, width, crc, whole=whole)
            sums = _row_sums(folder / sums_file(name), shape[0], recorded.get("sums_crc32"))
            if hasattr(os, "preadv"):
                return CopyArray(path, dtype, shape, offset, width, crc, sums, fd=os.open(path, os.O_RDONLY))
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
            whole = np.ndarray(shape, dtype, buffer=mapped, offset=offset)
            return CopyArray(path, dtype, shape, offset, width, crc, sums, whole=whole, map=mapped)
    except DamagedCopyError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DamagedCopyError(path, f"is damaged: {error}") from None


def _row_sums(path: Path, rows: int, recorded: Any) -> np.ndarray:
    """The ``rows`` row checksums in ``path``, once its bytes have the CRC32 the copy's record holds (``recorded``).

    So a row checksum file is bound to its copy: one replaced together with its array (another
    entry's pair, of the same shape) is refused here, as the array alone is by its rows. One
    CRC32 of the file: 0.1 ms a million rows (its sha256 would take 7 ms).

    Raises
    ------
    DamagedCopyError
        Its CRC32 is not the recorded one (or none is recorded: a copy made by an older glyphforge), or it does not
        hold ``rows`` checksums.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DamagedCopyError(path, f"cannot be read ({error.strerror or error})") from None
    if not isinstance(recorded, int):
        raise DamagedCopyError(path, "has no CRC32 in the copy's record (made by an older glyphforge)")
    if crc32(data) != recorded:
        raise DamagedCopyError(path, "is not the row checksum file the copy's record holds (its CRC32 differs: "
                                     "changed or replaced since the copy was made)")
    stream = io.BytesIO(data)
    try:
        layout = npy_layout(stream)[:2]
    except ValueError as error:
        raise DamagedCopyError(path, f"is damaged: {error}") from None
    if layout != ((rows,), np.dtype(np.uint32)) or len(data) - stream.tell() != 4 * rows:
        raise DamagedCopyError(path, f"does not hold the checksums of {rows} rows")
    return np.frombuffer(data, np.uint32, rows, stream.tell())


def make_copy(dataset: ShardReader, announce: Callable[[int, Path], None] | None = None) -> DecodedCopy:
    """Return the decoded copy of ``dataset``'s entry, making it first unless another process has.

    See the module docstring for the lock, the staging and the free space asked for. A damaged
    copy found there is dropped (`drop_copy`) and made again.

    Parameters
    ----------
    dataset
        The built dataset.
    announce
        Called with the copy's size in bytes and its directory just before it is written (not when
        another process made it).

    Raises
    ------
    NotEnoughSpaceError
        The copy would leave less than `RESERVE_FRACTION` of its disk free; nothing was written.
    ForeignCopyError
        ``<key>.decoded`` is not glyphforge's (a link, a file, a folder without its record): nothing was read or
        written there.
    StorageError
        Writing failed (a full disk, a read-only cache, a permission): the staging is removed.
    LockTimeoutError
        Another process held the lock longer than the lock timeout.
    """
    entry, n = dataset.entry, len(dataset)
    target = decoded_dir(entry.path)
    with writing(_lock_path(target)), hold(filelock.FileLock(_lock_path(target)),
                                           f"decoding {entry.kind} {entry.key[:12]}", config.lock_timeout()):
        try:
            copy = open_copy(entry, dataset.layout, n)
        except DamagedCopyError as error:
            copy, failed = None, remove_tree(target)
            _say_dropped(entry, error, _REMOVED if failed is None else f"could not remove it ({failed})",
                         "making it again now")
        if copy is not None:
            return copy
        _remove_leftovers(entry.path)
        check_room(dataset, target.parent)
        if announce is not None:
            announce(copy_nbytes(dataset), target)
        with writing(target):
            staging = make_temp_dir(decoded_staging_prefix(entry.path), target.parent)
            try:
                write_npy_files(dataset, staging)
                record_copy(staging, entry.key, dataset.layout)
                staging.rename(target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    copy = open_copy(entry, dataset.layout, n)
    if copy is None:
        raise RuntimeError(f"{target} was written but cannot be read back as {entry.kind} {entry.key[:12]}'s copy")
    return copy


def drop_copy(entry: Entry, error: DamagedCopyError, then: str) -> None:
    """Remove the damaged decoded copy of ``entry`` that ``error`` names (glyphforge's own) and say so (a WARNING).

    Under the copy's lock, and only that copy (``error.identity``), never one made since; when
    another process holds the lock (it is making or dropping a copy), it is left to that one.
    ``then`` is what the reader does next ("rows are read from the shards").
    """
    target = decoded_dir(entry.path)
    try:
        with writing(_lock_path(target)), hold(filelock.FileLock(_lock_path(target)),
                                               f"dropping the damaged copy of {entry.kind} {entry.key[:12]}", 0):
            if error.identity is None or identity(target) != error.identity:
                done = "another process removed it already"
            else:
                failed = remove_tree(target)
                done = _REMOVED if failed is None else f"could not remove it ({failed})"
    except (OSError, LockTimeoutError) as cause:  # another process holds the lock: it is making or dropping a copy
        done = f"left it to another process ({cause})"
    _say_dropped(entry, error, done, then)


def _say_dropped(entry: Entry, error: DamagedCopyError, done: str, then: str) -> None:
    """Log the WARNING of a damaged copy: which file, what is wrong, what was ``done`` with it, what happens next."""
    log.warning("%s %s: its decoded copy is damaged: %s; %s; %s", entry.kind, entry.key[:12], error, done, then)


def _lock_path(target: Path) -> Path:
    """The lock of the decoded copy ``target``'s makers: ``.<key>.decoded.lock`` beside it."""
    return target.parent / f".{target.name}.lock"


def _remove_leftovers(entry_dir: Path) -> None:
    """Remove the staging of makers that died (call holding the lock)."""
    for staging in decoded_dir(entry_dir).parent.glob(f"{decoded_staging_prefix(entry_dir)}*"):
        remove_tree(staging)


def copy_nbytes(dataset: ShardReader) -> int:
    """The bytes of a decoded copy of ``dataset``: its arrays, their row checksums, headers and records."""
    return dataset.nbytes + 4 * len(dataset) * len(dataset.layout) + (2 * len(dataset.layout) + 2) * mmap.PAGESIZE


def check_room(dataset: ShardReader, folder: Path) -> None:
    """Raise `NotEnoughSpaceError` unless a copy of ``dataset`` in ``folder`` leaves `RESERVE_FRACTION` of it free."""
    disk = shutil.disk_usage(folder)
    needed = copy_nbytes(dataset)
    reserve = int(disk.total * RESERVE_FRACTION)
    if disk.free - needed >= reserve:
        return
    error = NotEnoughSpaceError(
        f"no room for a decoded copy of {dataset.entry.kind} {dataset.key[:12]} in {folder}: it needs "
        f"{human_size(needed)} and only {human_size(disk.free)} is free, of which {human_size(reserve)} "
        f"({RESERVE_FRACTION:.0%} of the disk) stays free. Random rows are decoded shard by shard instead, which "
        "is slow; free space there (`glyphforge cache gc --max-size`), or give a data dir on a larger disk "
        "(--data-dir or $GLYPHFORGE_DATA_DIR), or train from ds.stream(batch_size), which needs no copy")
    error.errno, error.filename = errno.ENOSPC, str(folder)
    raise error
