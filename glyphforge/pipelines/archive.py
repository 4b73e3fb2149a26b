"""Safe zip reading: members by name without extracting, and guarded extraction.

Every problem with an archive raises :class:`ArchiveError` naming the archive (and
the member), saying what is wrong and what to do:

* a truncated or corrupt archive (no central directory, bad CRC, broken deflate data);
* zip slip: member names that are absolute, contain ``..`` or are symlinks;
* zip bombs: more members or more uncompressed bytes than the caps allow, checked
  against the declared sizes before anything is written and against the actual
  bytes while streaming.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Union

PathLike = Union[str, "os.PathLike[str]"]

#: Default cap on the uncompressed bytes of one read or of one extraction (8 GiB).
DEFAULT_MAX_TOTAL_BYTES = 8 << 30
#: Default cap on the number of members an extraction may write.
DEFAULT_MAX_MEMBERS = 200_000

_CHUNK = 1 << 20
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError)
_ADVICE = "Delete the archive and download it again (or place a good copy by hand)."


class ArchiveError(ValueError):
    """A zip archive is corrupt, truncated, unsafe or too large; the message says which."""


def list_members(zip_path: PathLike) -> list[str]:
    """Return the names of the file members (not directories), in archive order.

    Raises
    ------
    ArchiveError
        When the archive is missing its central directory (truncated or not a zip).
    """
    with _open_zip(zip_path) as archive:
        return [info.filename for info in archive.infolist() if not info.is_dir()]


@contextmanager
def open_member(zip_path: PathLike, name: str) -> Iterator[IO[bytes]]:
    """Open one member for streaming reads, without extracting anything.

    Use as ``with open_member(path, "gzip/emnist-digits-mapping.txt") as stream: ...``.
    A CRC or decompression error raised while reading inside the ``with`` block is
    turned into :class:`ArchiveError` naming the archive and the member.
    """
    with _open_zip(zip_path) as archive:
        info = _member_info(archive, zip_path, name)
        try:
            with archive.open(info) as stream:
                yield stream
        except _CORRUPT as error:
            raise _corrupt_member(zip_path, name, error) from error


def read_member(zip_path: PathLike, name: str, *, max_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> bytes:
    """Return the uncompressed bytes of one member.

    Parameters
    ----------
    zip_path
        The archive.
    name
        The member's full name inside the archive, e.g. ``"gzip/emnist-letters-mapping.txt"``.
    max_bytes
        Refuse members larger than this (declared or actual size).

    Raises
    ------
    ArchiveError
        When the member is missing, too large, or its data is corrupt.
    """
    with _open_zip(zip_path) as archive:
        return _read_info(archive, zip_path, _member_info(archive, zip_path, name), max_bytes)


def iter_members(
    zip_path: PathLike,
    names: Iterable[str] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
) -> Iterator[tuple[str, bytes]]:
    """Yield ``(name, bytes)`` for many members, opening the archive only once.

    Parameters
    ----------
    zip_path
        The archive.
    names
        The members to read, in this order; default: every file member in archive order.
    max_bytes
        Cap on the size of each member (declared or actual).
    """
    with _open_zip(zip_path) as archive:
        if names is None:
            infos: Iterable[zipfile.ZipInfo] = (i for i in archive.infolist() if not i.is_dir())
        else:
            infos = (_member_info(archive, zip_path, name) for name in names)
        for info in infos:
            yield info.filename, _read_info(archive, zip_path, info, max_bytes)


def extract(
    zip_path: PathLike,
    dest: PathLike,
    *,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> list[Path]:
    """Extract a whole archive safely into ``dest``, all or nothing.

    The member count and declared total size are checked first, then every member
    name (no absolute paths, no ``..``, no symlinks or other special files); the
    members are then streamed into a staging directory beside ``dest`` while the
    actual bytes are counted (duplicates and collisions are refused), and the staging
    directory is renamed to ``dest`` only when everything succeeded.

    Parameters
    ----------
    zip_path
        The archive.
    dest
        The directory to create; it must not exist yet, or be empty.
    max_total_bytes
        Cap on the total uncompressed size.
    max_members
        Cap on the number of members (files and directories).

    Returns
    -------
    list of Path
        The extracted files, in archive order.

    Raises
    ------
    ArchiveError
        When the archive is corrupt, unsafe or exceeds a cap; ``dest`` is then untouched.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ArchiveError(
            f"cannot extract {zip_path} into {dest}: it exists and is not an empty directory. "
            "Choose a new directory or remove this one."
        )
    with _open_zip(zip_path) as archive:
        infos = archive.infolist()
        _check_caps(zip_path, infos, max_total_bytes, max_members)
        relative = [_safe_relative_path(zip_path, info) for info in infos]
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extracting-", dir=dest.parent))
        try:
            budget = [max_total_bytes]
            for info, rel in zip(infos, relative):
                _extract_one(archive, zip_path, info, staging / rel, budget)
            if dest.exists():
                dest.rmdir()
            os.replace(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return [dest / rel for info, rel in zip(infos, relative) if not info.is_dir()]


@contextmanager
def _open_zip(zip_path: PathLike) -> Iterator[zipfile.ZipFile]:
    try:
        archive = zipfile.ZipFile(zip_path)
    except FileNotFoundError:
        raise
    except (*_CORRUPT, OSError) as error:
        raise ArchiveError(
            f"{zip_path} is not a complete zip archive ({error}): it is truncated or corrupt. "
            + _ADVICE
        ) from error
    with archive:
        yield archive


def _member_info(archive: zipfile.ZipFile, zip_path: PathLike, name: str) -> zipfile.ZipInfo:
    try:
        return archive.getinfo(name)
    except KeyError:
        sample = ", ".join(repr(n) for n in archive.namelist()[:5])
        raise ArchiveError(
            f"{zip_path} has no member {name!r} (it holds {len(archive.namelist())} members, "
            f"e.g. {sample}). Check the member name, or that this is the right archive."
        ) from None


def _read_info(archive: zipfile.ZipFile, zip_path: PathLike, info: zipfile.ZipInfo, max_bytes: int) -> bytes:
    _check_member_size(zip_path, info, max_bytes)
    parts: list[bytes] = []
    received = 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                received += len(chunk)
                _check_actual_size(zip_path, info, received, max_bytes)
                parts.append(chunk)
    except _CORRUPT as error:
        raise _corrupt_member(zip_path, info.filename, error) from error
    return b"".join(parts)


def _extract_one(
    archive: zipfile.ZipFile, zip_path: PathLike, info: zipfile.ZipInfo, target: Path, budget: list[int]
) -> None:
    received = 0
    try:
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(info) as stream, open(target, "xb") as out:
            while chunk := stream.read(_CHUNK):
                received += len(chunk)
                _check_actual_size(zip_path, info, received, info.file_size)
                budget[0] -= len(chunk)
                if budget[0] < 0:
                    raise ArchiveError(
                        f"{zip_path}: member {info.filename!r} takes the uncompressed total past "
                        "the cap while extracting (a zip bomb?). Nothing was extracted; raise "
                        "max_total_bytes only if you trust this archive."
                    )
                out.write(chunk)
    except _CORRUPT as error:
        raise _corrupt_member(zip_path, info.filename, error) from error
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as error:
        raise ArchiveError(
            f"{zip_path}: member {info.filename!r} collides with another member ({error}). "
            "The archive is malformed; nothing was extracted."
        ) from error


def _check_caps(zip_path: PathLike, infos: list[zipfile.ZipInfo], max_total_bytes: int, max_members: int) -> None:
    if len(infos) > max_members:
        raise ArchiveError(
            f"{zip_path} has {len(infos)} members, more than the cap of {max_members} "
            "(a zip bomb?). Nothing was extracted; raise max_members only if you trust this archive."
        )
    declared = sum(info.file_size for info in infos)
    if declared > max_total_bytes:
        raise ArchiveError(
            f"{zip_path} declares {declared} uncompressed bytes, more than the cap of "
            f"{max_total_bytes} (a zip bomb?). Nothing was extracted; raise max_total_bytes "
            "only if you trust this archive."
        )


def _check_member_size(zip_path: PathLike, info: zipfile.ZipInfo, max_bytes: int) -> None:
    if info.file_size > max_bytes:
        raise ArchiveError(
            f"{zip_path}: member {info.filename!r} declares {info.file_size} uncompressed bytes, "
            f"more than the cap of {max_bytes} (a zip bomb?). Raise the cap only if you trust "
            "this archive."
        )


def _check_actual_size(zip_path: PathLike, info: zipfile.ZipInfo, received: int, cap: int) -> None:
    if received > min(cap, info.file_size):
        raise ArchiveError(
            f"{zip_path}: member {info.filename!r} decompresses to more than "
            f"{min(cap, info.file_size)} bytes, beyond its declared size {info.file_size} or the "
            "cap (a zip bomb or a forged header). " + _ADVICE
        )


def _safe_relative_path(zip_path: PathLike, info: zipfile.ZipInfo) -> PurePosixPath:
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    clean = [part for part in parts if part not in ("", ".")]
    unsafe = (
        name.startswith(("/", "\\"))
        or (len(name) > 1 and name[0].isalpha() and name[1] == ":")
        or ".." in parts
        or not clean
    )
    if unsafe:
        raise ArchiveError(
            f"{zip_path}: member {name!r} would be written outside the destination "
            "(absolute path or '..'; zip slip). Nothing was extracted; do not use this archive."
        )
    mode = info.external_attr >> 16
    if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        kind = "a symlink" if stat.S_ISLNK(mode) else "a special file"
        raise ArchiveError(
            f"{zip_path}: member {name!r} is {kind}, which extraction refuses (it could point "
            "outside the destination). Nothing was extracted; do not use this archive."
        )
    return PurePosixPath(*clean)


def _corrupt_member(zip_path: PathLike, name: str, error: BaseException) -> ArchiveError:
    return ArchiveError(
        f"{zip_path}: member {name!r} is corrupt ({type(error).__name__}: {error}); "
        "the archive is damaged or truncated. " + _ADVICE
    )
