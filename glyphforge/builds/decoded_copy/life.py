"""A decoded copy's life on disk: where it lives, making and recording it, checking it when opened, dropping it.

Random rows of ``arrays.pklz`` cost a whole shard's decoding each; rows of a decoded copy cost a
read of their own bytes (from the page cache, once warm). The copy is made once per machine (per
cache) and read by every process that opens the entry, DataLoader workers included.

Layout: ``<root>/<kind>/<key>.decoded/`` beside the entry (`decoded_dir`), holding what
``ds.export`` writes (`glyphforge.builds.export.files.write_npy_files`): one ``<array>.npy`` per
array and ``metadata.json``. It is a companion of its entry (:mod:`glyphforge.cache.companions`):
the cache counts it (eviction too), verifies it against its record and removes it with its entry
(``cache rm``, eviction, a replaced entry), knowing only that record; ``glyphforge cache gc``
removes one whose entry is gone and the staging of a maker that died, ``glyphforge cache verify``
re-hashes every byte (`glyphforge.cache.companion_record.verify_record`).

Making it (`make_copy`):

* One maker at a time: the file lock ``<root>/<kind>/.<key>.decoded.lock``; a process that finds
  it held waits (logging who holds it, see `glyphforge.cache.locks.hold`), then uses the copy the
  holder made.
* Staged, then published: written and recorded in ``<root>/<kind>/.tmp-<key>.decoded-<random>/``
  and renamed into place, so a ``<key>.decoded`` directory is always a whole copy; a maker killed
  half-way leaves only its staging, which the next maker (or ``gc``) removes. Modes follow the
  umask (`glyphforge._files.make_temp_dir`, plain ``open``).
* Only with room: the copy must leave `RESERVE_FRACTION` of its disk free, else
  `NotEnoughSpaceError` before anything is written. (How much an automatic copy may take:
  `glyphforge.builds.decoded_copy.source`.)
* Recorded (`record_copy`): its maker reads every file back once and writes beside them
  ``<array>.crc32.npy``, the CRC32 of each row (uint32, one per row), and last ``checks.json``:
  the companion's record (`glyphforge.cache.companion_record`: the entry's key, per file its size
  and sha256) and, per array, where its rows start, a row's size, the CRC32 of all its rows and
  the CRC32 of its row checksum file (``sums_crc32``).

Checking it when opened (`open_copy`): the record is the entry's and every file has its recorded
size (`read_checks`); each array has the shape, start and row size recorded; arrays of at most
`LOAD_LIMIT` bytes (labels, boxes) are read whole and checked against their CRC32; larger ones
(the images) are opened for rows read and checked one by one
(`glyphforge.builds.decoded_copy.rows`), once their row checksum file has the CRC32 the record
holds, so an array replaced together with its checksums is refused. (A memory map of them would
not do: Linux maps a large folio of the page cache around each fault, over a megabyte a row was
measured, so random rows would make the whole file resident within an epoch; and a map serves
whatever the file holds by then.)

Dropping it: a copy failing a check is damaged (`DamagedCopyError`) and glyphforge's own, so its
reader removes it under its lock (`drop_copy`, with a WARNING) and reads the shards; its maker
makes it again. Only glyphforge's: a ``<key>.decoded`` that is a symbolic link, a file, or a
folder without ``checks.json`` raises `ForeignCopyError`: nothing is read from it, written or
removed there.
"""
from __future__ import annotations

import errno
import hashlib
import io
import logging
import mmap
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import filelock
import numpy as np
from isal.isal_zlib import crc32

from glyphforge import config
from glyphforge._files import make_temp_dir, remove_tree, writing
from glyphforge.builds.decoded_copy.rows import CopyArray, DamagedCopyError, DecodedCopy, close_arrays, row_sums
from glyphforge.builds.export.files import write_npy_files
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.cache.companion_record import (
    RECORD,
    DamagedCompanionError,
    foreign,
    read_record,
    recorded,
    write_record,
)
from glyphforge.cache.entry import Entry
from glyphforge.cache.layout import STAGING_PREFIX, folder_bytes
from glyphforge.cache.locks import LockTimeoutError, hold
from glyphforge.errors import StorageError
from glyphforge.textfmt import human_size

__all__ = ["ForeignCopyError", "NotEnoughSpaceError", "check_room", "copy_nbytes", "decoded_bytes", "decoded_dir",
           "drop_copy", "make_copy", "open_copy"]

log = logging.getLogger(__name__)
#: The suffix of an entry's decoded copy, ``<root>/<kind>/<key>.decoded`` (see `decoded_dir`).
DECODED_SUFFIX = ".decoded"
#: The part of its disk a decoded copy must leave free.
RESERVE_FRACTION = 0.05
#: The largest array of a copy that a reader loads whole (and checks once); larger ones are read row by row.
LOAD_LIMIT = 64 << 20
#: Bytes read at a time when a copy is recorded.
_BLOCK = 1 << 24
_REMOVED = "removed it (glyphforge's own copy; the entry itself is intact)"
#: What a ``<key>.decoded`` directory without a record is: not glyphforge's (see `glyphforge.cache.companions`).
_UNRECORDED = f"a folder without {RECORD} (the record glyphforge writes last into each copy it makes)"


class ForeignCopyError(StorageError):
    """``<key>.decoded`` is not glyphforge's decoded copy (a link, a file, a folder without its record): nothing was
    read or changed."""


class NotEnoughSpaceError(StorageError):
    """A decoded copy would not fit on its disk with `RESERVE_FRACTION` of it left free; nothing was written."""


# -- where it lives -------------------------------------------------------------------------------
def decoded_dir(entry_dir: Path) -> Path:
    """Return where the decoded copy of the entry in ``entry_dir`` lives: ``<root>/<kind>/<key>.decoded``."""
    return entry_dir.with_name(f"{entry_dir.name}{DECODED_SUFFIX}")


def decoded_staging_prefix(entry_dir: Path) -> str:
    """The name prefix of a staging directory of that decoded copy: the store's staging of key ``<key>.decoded``.

    So `CacheStore.gc` removes an abandoned one under the lock ``.<key>.decoded.lock``, which its maker holds.
    """
    return f"{STAGING_PREFIX}{entry_dir.name}{DECODED_SUFFIX}-"


def decoded_bytes(entry_dir: Path) -> int:
    """The bytes of the decoded copy of the entry in ``entry_dir``; 0 when it has none, or a link (not glyphforge's)."""
    return folder_bytes(decoded_dir(entry_dir))


def sums_file(name: str) -> str:
    """The file of array ``name``'s row checksums: ``<name>.crc32.npy``."""
    return f"{name}.crc32.npy"


def identity(folder: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``folder`` itself (a link is not followed); None when it is missing."""
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def _lock_path(target: Path) -> Path:
    """The lock of the decoded copy ``target``'s makers: ``.<key>.decoded.lock`` beside it."""
    return target.parent / f".{target.name}.lock"


# -- making and recording it ----------------------------------------------------------------------
def make_copy(dataset: ShardReader, announce: Callable[[int, Path], None] | None = None) -> DecodedCopy:
    """Return the decoded copy of ``dataset``'s entry, making it first unless another process has.

    See the module docstring for the lock, the staging and the free space asked for. A damaged
    copy found there is removed and made again.

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
    entry = dataset.entry
    target = decoded_dir(entry.path)
    with writing(_lock_path(target)), hold(filelock.FileLock(_lock_path(target)),
                                           f"decoding {entry.kind} {entry.key[:12]}", config.lock_timeout()):
        try:
            copy = open_copy(entry)
        except DamagedCopyError as error:
            copy, failed = None, remove_tree(target)
            _say_dropped(entry, error, _REMOVED if failed is None else f"could not remove it ({failed})",
                         "making it again now")
        if copy is not None:
            return copy
        for staging in target.parent.glob(f"{decoded_staging_prefix(entry.path)}*"):  # makers that died
            remove_tree(staging)
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
    copy = open_copy(entry)
    if copy is None:
        raise RuntimeError(f"{target} was written but cannot be read back as {entry.kind} {entry.key[:12]}'s copy")
    return copy


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


def record_copy(folder: Path, key: str, arrays: Iterable[str]) -> None:
    """Read the copy in ``folder`` back once and write its row checksums and ``checks.json`` (see the module docstring).

    Parameters
    ----------
    folder
        The copy, written (``<name>.npy`` for each of ``arrays``, ``metadata.json``), not yet published.
    key
        Its entry's key.
    arrays
        The names of its arrays.
    """
    files: dict[str, dict[str, Any]] = {}
    records: dict[str, dict[str, int]] = {}
    for name in arrays:
        path, digest = folder / f"{name}.npy", hashlib.sha256()
        with open(path, "rb") as stream:
            shape, dtype, offset = npy_layout(stream)
            stream.seek(0)
            digest.update(stream.read(offset))
            width, count = row_nbytes(shape, dtype), shape[0]
            sums, crc, step = np.empty(count, np.uint32), 0, max(1, _BLOCK // max(width, 1))
            for first in range(0, count, step):
                block = np.empty((min(step, count - first), width), np.uint8)
                if stream.readinto(block.reshape(-1).data) != block.nbytes:
                    raise DamagedCopyError(path, "was cut short while its copy was made")
                digest.update(block.reshape(-1).data)
                crc = crc32(block, crc)
                sums[first:first + len(block)] = row_sums(block)
        files[path.name] = {"size": path.stat().st_size, "sha256": digest.hexdigest()}
        np.save(folder / sums_file(name), sums)
        records[name] = {"offset": offset, "row_nbytes": width, "rows": count, "crc32": crc,
                         "sums_crc32": crc32((folder / sums_file(name)).read_bytes())}
    write_record(folder, key, files, arrays=records)


def npy_layout(stream: Any) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """Read the header of the ``.npy`` file ``stream``: its shape, dtype and where its data starts.

    Raises
    ------
    ValueError
        Not a version 1.0 header of a C-ordered array without objects (what glyphforge writes).
    """
    if np.lib.format.read_magic(stream) != (1, 0):
        raise ValueError("not a version 1.0 .npy header")
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    if fortran or dtype.hasobject:
        raise ValueError("not a C-ordered array of plain values")
    return tuple(shape), dtype, stream.tell()


def row_nbytes(shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    """The bytes of one row (``shape[1:]``) of an array."""
    return int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize


# -- checking it when opened ----------------------------------------------------------------------
def open_copy(entry: Entry) -> DecodedCopy | None:
    """Return the decoded copy of ``entry`` (a built dataset's cache entry), checked; None when it has none.

    Its record is read and every file's size checked (`read_checks`); arrays of at most
    `LOAD_LIMIT` bytes are read whole and checked, larger ones opened for reading rows. Each array
    has the rows and per-example shape the entry's manifest records.

    Raises
    ------
    ForeignCopyError
        ``<key>.decoded`` is not glyphforge's (a link, a file, a folder without its record): nothing was read from it.
    DamagedCopyError
        The copy is not what its maker recorded (see the module docstring).
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
    meta, arrays = entry.meta, dict[str, CopyArray]()
    try:
        record = read_checks(path, entry.key)
        for name, info in meta["layout"].items():
            arrays[name] = _open_array(path, name, (int(meta["n_examples"]), *info["shape"]), record)
    except DamagedCopyError as error:
        close_arrays(arrays.values())
        error.identity = found
        raise
    except BaseException:
        close_arrays(arrays.values())
        raise
    return DecodedCopy(path, arrays, found)


def read_checks(folder: Path, key: str) -> dict[str, Any]:
    """Return the record of the copy in ``folder`` (a directory) once each file it records has its recorded size.

    Raises
    ------
    DamagedCopyError
        No record (made by a glyphforge before checked copies, or lost), not the record of ``key``'s
        copy, or a file missing or of another size.
    """
    try:
        record = read_record(folder, key)
        if not all(isinstance(info, dict) for info in record["arrays"].values()):
            raise ValueError(f"not the record of the copy of {key[:12]}")
    except DamagedCompanionError as error:
        raise DamagedCopyError(error.path, error.problem) from None
    except (ValueError, KeyError, AttributeError) as error:
        raise DamagedCopyError(folder / RECORD, f"is not a copy's record ({error})") from None
    return record


def _open_array(folder: Path, name: str, shape: tuple[int, ...], record: dict[str, Any]) -> CopyArray:
    """Open array ``name`` of the copy in ``folder`` for reading rows (see `open_copy`).

    Raises
    ------
    DamagedCopyError
        It is not an array of ``shape`` as the copy's ``record`` describes it, or not its checksum; or its row
        checksums are not those the record holds (`_row_sums`).
    """
    path, facts = folder / f"{name}.npy", record["arrays"].get(name)
    try:
        with open(path, "rb") as stream:
            found, dtype, offset = npy_layout(stream)
            if (found != shape or not isinstance(facts, dict) or facts.get("offset") != offset
                    or facts.get("row_nbytes") != row_nbytes(shape, dtype)):
                raise ValueError(f"not the array of shape {shape} its record describes")
            crc, width = int(facts["crc32"]), int(facts["row_nbytes"])
            data = shape[0] * width
            if data <= LOAD_LIMIT:
                whole = np.empty(shape, dtype)
                if stream.readinto(whole.reshape(-1).view(np.uint8).data) != data:
                    raise ValueError("cut short")
                if crc32(whole.reshape(-1).view(np.uint8)) != crc:
                    raise ValueError("changed since the copy was made (its checksum differs)")
                return CopyArray(path, dtype, shape, offset, width, crc, whole=whole)
            sums = _row_sums(folder / sums_file(name), shape[0], facts.get("sums_crc32"))
            if hasattr(os, "preadv"):
                return CopyArray(path, dtype, shape, offset, width, crc, sums, fd=os.open(path, os.O_RDONLY))
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
            whole = np.ndarray(shape, dtype, buffer=mapped, offset=offset)
            return CopyArray(path, dtype, shape, offset, width, crc, sums, whole=whole, map=mapped)
    except DamagedCopyError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DamagedCopyError(path, f"is damaged: {error}") from None


def _row_sums(path: Path, rows: int, expected: Any) -> np.ndarray:
    """The ``rows`` row checksums in ``path``, once its bytes have the CRC32 the copy's record holds (``expected``).

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
    if not isinstance(expected, int):
        raise DamagedCopyError(path, "has no CRC32 in the copy's record (made by an older glyphforge)")
    if crc32(data) != expected:
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


# -- dropping it ----------------------------------------------------------------------------------
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
