"""A built dataset's decoded copy: where it lives, what its maker records, what its readers check.

A decoded copy (`glyphforge.builds.decoded_copy.make`: ``<key>.decoded/`` beside its entry, holding
``<array>.npy`` files and ``metadata.json``) is a companion of its entry
(:mod:`glyphforge.cache.companions`): the cache counts it, verifies it against its record and
removes it with its entry, knowing only that record. Before publishing it, its maker reads
every file back once (`record_copy`) and writes beside them:

* ``<array>.crc32.npy``: the CRC32 of each row of the array (uint32, one per row). A reader
  reading rows checks them before returning them (a batch with one CRC32 against its rows'
  combined, `glyphforge.builds.decoded_copy.crc_combine`), once this file's own CRC32 is the one the
  record holds (checked when the copy is opened: an array replaced together with its
  checksums is refused).
* ``checks.json``, last: the companion's record (`glyphforge.cache.companion_record`: the
  entry's key, per file of the copy its size and sha256) and, per array, where its rows
  start, a row's size, the CRC32 of all its rows (a reader loading or reading an array
  whole checks that) and the CRC32 of its row checksum file (``sums_crc32``). A reader
  checks the sizes when it opens the copy (`read_checks`), ``glyphforge cache verify`` every
  byte (`glyphforge.cache.companion_record.verify_record`).

A copy failing a check is damaged (`DamagedCopyError`): it is glyphforge's own, so readers
drop it and read the shards. A ``<key>.decoded`` that is not a directory (a symbolic link, a
file; `foreign`), or a directory without ``checks.json``, is not glyphforge's: nothing is read
from it or done to it.

CRC32 is isal's where it is installed (several GB/s), else zlib's: the same values.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from isal.isal_zlib import crc32

from glyphforge.cache.companion_record import RECORD, DamagedCompanionError, read_record, write_record
from glyphforge.cache.companion_record import foreign as foreign  # what a reader asks of the copy's folder first
from glyphforge.cache.layout import STAGING_PREFIX, folder_bytes
from glyphforge.errors import IntegrityError, StorageError

#: The suffix of an entry's decoded copy, ``<root>/<kind>/<key>.decoded`` (see `decoded_dir`).
DECODED_SUFFIX = ".decoded"
#: Bytes read at a time when a copy is recorded.
_BLOCK = 1 << 24


class DamagedCopyError(StorageError, IntegrityError):
    """A file of a decoded copy is not what its maker recorded (``path``: that file, ``problem``: what is wrong).

    The copy is to be dropped. ``identity``: the copy directory's ``(st_dev, st_ino)`` when known, so that only
    that copy is dropped.
    """

    def __init__(self, path: Path, problem: str, identity: tuple[int, int] | None = None) -> None:
        super().__init__(f"{path} {problem}")
        self.path, self.problem, self.identity = path, problem, identity


class ForeignCopyError(StorageError):
    """``<key>.decoded`` is not glyphforge's decoded copy (a link, a file, a folder without its record): nothing was
    read or changed."""


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


def row_sums(rows: np.ndarray) -> np.ndarray:
    """The CRC32 of each row of ``rows``, a C-contiguous ``(count, row bytes)`` uint8 array."""
    return np.fromiter(map(crc32, rows), np.uint32, len(rows))


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
    recorded: dict[str, dict[str, int]] = {}
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
        recorded[name] = {"offset": offset, "row_nbytes": width, "rows": count, "crc32": crc,
                          "sums_crc32": crc32((folder / sums_file(name)).read_bytes())}
    write_record(folder, key, files, arrays=recorded)


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
