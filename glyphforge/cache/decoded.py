"""The checks of a built dataset's decoded copy: what its maker records, what its readers and ``cache verify`` check.

A decoded copy (`glyphforge.builds.materialize`: ``<key>.decoded/`` beside its entry, holding
``<array>.npy`` files and ``metadata.json``) is part of its entry's integrity model. Before
publishing it, its maker reads every file back once (`record_copy`) and writes beside them:

* ``<array>.crc32.npy``: the CRC32 of each row of the array (uint32, one per row). A reader
  reading rows one at a time checks each before returning it.
* ``checks.json``, last: the entry's key; per array, where its rows start, a row's size and
  the CRC32 of all its rows (a reader loading or reading an array whole checks that); per
  file of the copy, its size and sha256. A reader checks the sizes when it opens the copy
  (`read_checks`), ``glyphforge cache verify`` every byte (`verify_copy`).

A copy failing a check is damaged (`DamagedCopyError`): it is glyphforge's own, so readers
drop it and read the shards. A ``<key>.decoded`` that is not a directory (a symbolic link, a
file) is not glyphforge's (`foreign`): nothing is read from it or done to it.

CRC32 is isal's where it is installed (several GB/s), else zlib's: the same values.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._files import sha256_file
from glyphforge.cache.layout import STAGING_PREFIX, folder_bytes
from glyphforge.errors import IntegrityError, StorageError

crc32: Callable[..., int]
try:
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - exercised only where isal is missing
    crc32 = zlib.crc32

#: The suffix of an entry's decoded copy, ``<root>/<kind>/<key>.decoded`` (see `decoded_dir`).
DECODED_SUFFIX = ".decoded"
#: The record of a copy, written last.
CHECKS_FILE = "checks.json"
#: Bytes read at a time when a copy is recorded.
_BLOCK = 1 << 24
_REMOVE = ("It is only a copy (the entry itself is intact), and glyphforge drops it at its next read and reads "
           "the shards; to remove it now: rm -r '{folder}' (ds.materialize() makes it again)")


class DamagedCopyError(StorageError, IntegrityError):
    """A file of a decoded copy is not what its maker recorded (``path``: that file, ``problem``: what is wrong).

    The copy is to be dropped. ``identity``: the copy directory's ``(st_dev, st_ino)`` when known, so that only
    that copy is dropped.
    """

    def __init__(self, path: Path, problem: str, identity: tuple[int, int] | None = None) -> None:
        super().__init__(f"{path} {problem}")
        self.path, self.problem, self.identity = path, problem, identity


class ForeignCopyError(StorageError):
    """``<key>.decoded`` is not glyphforge's decoded copy (a symbolic link, a file): nothing was read or changed."""


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


def foreign(folder: Path) -> str | None:
    """What ``folder`` is when it exists but is no directory ("a symbolic link to /etc", "a file"), else None."""
    try:
        mode = folder.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return f"a symbolic link to {os.readlink(folder)}"
    return None if stat.S_ISDIR(mode) else "a file, not a directory"


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
        recorded[name] = {"offset": offset, "row_nbytes": width, "rows": count, "crc32": crc}
    for path in sorted(folder.iterdir()):
        if path.name not in files:
            files[path.name] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    record = {"key": key, "arrays": recorded, "files": files}
    (folder / CHECKS_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def read_checks(folder: Path, key: str) -> dict[str, Any]:
    """Return the record of the copy in ``folder`` (a directory) once each file it records has its recorded size.

    Raises
    ------
    DamagedCopyError
        No record (made by a glyphforge before checked copies, or lost), not the record of ``key``'s
        copy, or a file missing or of another size.
    """
    path = folder / CHECKS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        files, arrays = record["files"], record["arrays"]
        sizes = {name: int(info["size"]) for name, info in files.items()}
        if record["key"] != key or not all(isinstance(info, dict) for info in arrays.values()):
            raise ValueError(f"not the record of the copy of {key[:12]}")
    except FileNotFoundError:
        raise DamagedCopyError(path, "is missing: the copy has no checksums (made by an older glyphforge, or "
                                     "damaged)") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise DamagedCopyError(path, f"is not a copy's record ({error})") from None
    for name, size in sizes.items():
        try:
            found = (folder / name).stat().st_size
        except FileNotFoundError:
            raise DamagedCopyError(folder / name, "is missing") from None
        if found != size:
            raise DamagedCopyError(folder / name, f"is {found:,} bytes where the copy's record says {size:,} "
                                                  "(truncated or changed since it was made)")
    return dict(record)


def verify_copy(folder: Path, key: str) -> list[tuple[Path, str]]:
    """Check every byte of the decoded copy in ``folder`` against its record: what is wrong, as (path, message).

    Empty when it is whole, or when there is none. A ``folder`` that is not a directory is reported
    as not glyphforge's (with what to do), and left as it is.
    """
    what = foreign(folder)
    if what is not None:
        return [(folder, f"is {what}, not glyphforge's decoded copy of {key[:12]}: glyphforge neither reads nor "
                         "changes it. Remove it (rm, which leaves a link's target as it is) so that a copy can be "
                         "made there")]
    if not folder.exists():
        return []
    advice = _REMOVE.format(folder=folder)
    try:
        record = read_checks(folder, key)
    except DamagedCopyError as error:
        return [(error.path, f"{error.problem}. {advice}")]
    problems = []
    for name, info in sorted(record["files"].items()):
        try:
            digest = sha256_file(folder / name)
        except OSError as error:
            problems.append((folder / name, f"cannot be read ({error.strerror or error}). {advice}"))
            continue
        if digest != info["sha256"]:
            problems.append((folder / name, f"sha256 differs from the decoded copy's record (changed on disk). "
                                            f"{advice}"))
    return problems
