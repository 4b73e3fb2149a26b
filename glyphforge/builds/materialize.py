"""A built dataset's decoded copy: its arrays as uncompressed ``.npy`` files, for random rows at memory speed.

Random rows of ``arrays.pklz`` cost a whole shard's decoding each; rows of a decoded
copy cost a read of their own bytes (from the page cache, once warm). The copy is made once per machine (per cache)
and read by every process that opens the entry, DataLoader workers included.

Layout: ``<root>/<kind>/<key>.decoded/`` beside the entry (`glyphforge.cache.store.decoded_dir`),
holding what ``ds.export`` writes (`glyphforge.builds.export.write_npy_files`): one
``<array name>.npy`` per array and ``metadata.json``. The cache store treats it as part of
its entry: ``glyphforge cache rm`` and eviction remove it with the entry (eviction counts
its bytes), a replaced entry loses it, ``glyphforge cache gc`` removes one whose entry is
gone and the staging of a maker that died.

Making it (`make_copy`):

* One maker at a time: the file lock ``<root>/<kind>/.<key>.decoded.lock``; a process
  that finds it held waits (logging who holds it, see `glyphforge.cache.locks.hold`), then
  uses the copy the holder made.
* Staged, then published: written in ``<root>/<kind>/.tmp-<key>.decoded-<random>/`` and
  renamed into place, so a ``<key>.decoded`` directory is always a whole copy; a maker
  killed half-way leaves only its staging, which the next maker (or ``gc``) removes.
* Modes follow the umask (`glyphforge._files.make_temp_dir`, plain ``open``).
* Only with room: the copy must leave `RESERVE_FRACTION` of its disk free, else
  `NotEnoughSpaceError` before anything is written.

Reading (`DecodedCopy`): the rows asked for are copied out, never viewed. Arrays of at most
`MAP_LIMIT` bytes (labels, boxes) are memory-mapped; larger ones (the images) are read a
row at a time with ``os.preadv`` into the output, because Linux maps a large folio of the
page cache around each fault (over a megabyte a row was measured): random rows of a
memory map would make the whole file resident within an epoch. So a process's resident
memory stays at the small arrays plus the rows it was given, while the page cache (shared
by every process of the machine) serves the reads.
"""
from __future__ import annotations

import errno
import json
import logging
import mmap
import os
import shutil
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock
import numpy as np

from glyphforge import config
from glyphforge._files import StorageError, make_temp_dir, remove_tree, writing
from glyphforge.builds.export import METADATA_FILE, write_npy_files
from glyphforge.cache.locks import hold
from glyphforge.cache.store import Entry, decoded_dir, decoded_staging_prefix
from glyphforge.textfmt import human_size

if TYPE_CHECKING:
    from glyphforge.builds.dataset import BuiltDataset

log = logging.getLogger(__name__)

#: The part of its disk a decoded copy must leave free.
RESERVE_FRACTION = 0.05
#: The largest array file of a copy that is memory-mapped; larger ones are read row by row (see the module docstring).
MAP_LIMIT = 64 << 20


class NotEnoughSpaceError(StorageError):
    """A decoded copy would not fit on its disk with `RESERVE_FRACTION` of it left free; nothing was written."""


@dataclass(frozen=True)
class _Array:
    """One array of a copy: memory-mapped (``mapped``, viewing ``map``), or read by ``os.preadv`` from ``fd``.

    ``offset`` is where its rows start in the file, ``shape`` its whole shape.
    """

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    offset: int
    fd: int | None = None
    map: mmap.mmap | None = None
    mapped: np.ndarray | None = None

    @property
    def row_nbytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Copies of rows ``rows`` (non-negative ints, any order), read in file order."""
        if self.mapped is not None:
            return self.mapped[rows]
        assert self.fd is not None, "an array is mapped or read"
        size = self.row_nbytes
        flat = np.empty(len(rows) * size, np.uint8)
        view = flat.data
        order = np.argsort(rows, kind="stable")
        for position, row in zip(order.tolist(), rows[order].tolist(), strict=True):
            if os.preadv(self.fd, [view[position * size:(position + 1) * size]], self.offset + row * size) != size:
                raise OSError(errno.EIO, f"row {row} is cut short: the decoded copy was truncated while it was read")
        return flat.view(self.dtype).reshape(len(rows), *self.shape[1:])

    def read_into(self, out: np.ndarray) -> None:
        """Copy the whole array into ``out`` (C-contiguous, of its dtype and shape), in file order."""
        if self.mapped is not None:
            out[...] = self.mapped
            return
        assert self.fd is not None, "an array is mapped or read"
        view, done = out.reshape(-1).view(np.uint8).data, 0
        while done < len(view):
            count = os.preadv(self.fd, [view[done:]], self.offset + done)
            if not count:
                raise OSError(errno.EIO, "the decoded copy was truncated while it was read")
            done += count

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


class DecodedCopy:
    """The arrays of a decoded copy (see the module docstring); rows are read with `take` and `row`.

    Parameters
    ----------
    path
        The copy's directory.
    arrays
        Each array, by name.
    """

    def __init__(self, path: Path, arrays: dict[str, _Array]) -> None:
        self.path = path
        self._arrays = arrays
        weakref.finalize(self, _close, list(arrays.values()))

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Return copies of rows ``rows`` (non-negative ints, any order) of every array."""
        return {name: array.take(rows) for name, array in self._arrays.items()}

    def row(self, number: int) -> dict[str, Any]:
        """Return a copy of row ``number`` (a non-negative int) of every array."""
        rows = np.array([number])
        return {name: array.take(rows)[0] for name, array in self._arrays.items()}

    def read_into(self, out: dict[str, np.ndarray]) -> None:
        """Copy every array whole into ``out`` (by name: C-contiguous arrays of their dtypes and shapes)."""
        for name, array in self._arrays.items():
            array.read_into(out[name])


def _close(arrays: list[_Array]) -> None:
    for array in arrays:
        array.close()


def open_copy(entry: Entry, layout: dict[str, Any], n_examples: int) -> DecodedCopy | None:
    """Return the decoded copy of ``entry``, or None when it has none (or one that is not whole: made again later).

    Parameters
    ----------
    entry
        A built dataset's cache entry.
    layout
        Each array's ``{"dtype", "shape"}`` (per example), as the entry's manifest records it.
    n_examples
        The number of rows every array must have.
    """
    path = decoded_dir(entry.path)
    try:
        document = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("key") != entry.key:
        return None
    arrays = {}
    for name, info in layout.items():
        mapped = _map_npy(path / f"{name}.npy", (n_examples, *info["shape"]))
        if mapped is None:
            return None
        arrays[name] = mapped
    return DecodedCopy(path, arrays)


def _map_npy(path: Path, shape: tuple[int, ...]) -> _Array | None:
    """Open the ``.npy`` file ``path`` for reading rows; None when it is missing or not an array of ``shape``.

    Mapped when at most `MAP_LIMIT` bytes, else read with ``os.preadv`` (everywhere there is one).
    """
    try:
        with open(path, "rb") as stream:
            if np.lib.format.read_magic(stream) != (1, 0):
                return None
            found, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
            offset = stream.tell()
            size = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if tuple(found) != tuple(shape) or fortran or dtype.hasobject or path.stat().st_size != size:
                return None
            if size == offset:  # an empty array: nothing to read
                return _Array(dtype, shape, offset, mapped=np.empty(shape, dtype))
            if size - offset > MAP_LIMIT and hasattr(os, "preadv"):
                return _Array(dtype, shape, offset, fd=os.open(path, os.O_RDONLY))
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    return _Array(dtype, shape, offset, map=mapped, mapped=np.ndarray(shape, dtype, buffer=mapped, offset=offset))


def make_copy(dataset: BuiltDataset) -> DecodedCopy:
    """Return the decoded copy of ``dataset``'s entry, making it first unless another process has.

    See the module docstring for the lock, the staging and the free space asked for.

    Raises
    ------
    NotEnoughSpaceError
        The copy would leave less than `RESERVE_FRACTION` of its disk free; nothing was written.
    StorageError
        Writing failed (a full disk, a read-only cache, a permission): the staging is removed.
    LockTimeoutError
        Another process held the lock longer than the lock timeout.
    """
    entry, n = dataset.entry, len(dataset)
    target = decoded_dir(entry.path)
    lock_path = target.parent / f".{target.name}.lock"
    with writing(lock_path), hold(filelock.FileLock(lock_path), f"decoding {entry.kind} {entry.key[:12]}",
                                  config.lock_timeout()):
        copy = open_copy(entry, dataset.layout, n)
        if copy is not None:
            return copy
        _remove_leftovers(entry.path)
        _check_room(dataset, target.parent)
        with writing(target):
            staging = make_temp_dir(decoded_staging_prefix(entry.path), target.parent)
            try:
                write_npy_files(dataset, staging)
                staging.rename(target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    copy = open_copy(entry, dataset.layout, n)
    if copy is None:
        raise RuntimeError(f"{target} was written but cannot be read back as {entry.kind} {entry.key[:12]}'s copy")
    return copy


def _remove_leftovers(entry_dir: Path) -> None:
    """Remove a copy that is not whole and the staging of makers that died (call holding the lock)."""
    target = decoded_dir(entry_dir)
    if target.exists():
        remove_tree(target)
    for staging in target.parent.glob(f"{decoded_staging_prefix(entry_dir)}*"):
        remove_tree(staging)


def _check_room(dataset: BuiltDataset, folder: Path) -> None:
    """Raise `NotEnoughSpaceError` unless a copy of ``dataset`` in ``folder`` leaves `RESERVE_FRACTION` of it free."""
    disk = shutil.disk_usage(folder)
    needed = dataset.nbytes + (len(dataset.layout) + 1) * mmap.PAGESIZE  # headers and metadata.json
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
