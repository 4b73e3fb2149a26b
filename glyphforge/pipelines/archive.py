"""Safe zip reading: members by name, without extracting anything.

Every problem with an archive raises :class:`ArchiveError` naming the archive (and
the member), saying what is wrong and what to do:

* a truncated or corrupt archive (no central directory, bad CRC, broken deflate data);
* zip bombs: a member larger than the cap, checked against its declared size before
  reading and against the actual bytes while streaming (a forged header).
"""
from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from glyphforge._checks import PathLike

#: Default cap on the uncompressed bytes of one member read (8 GiB).
DEFAULT_MAX_TOTAL_BYTES = 8 << 30

_CHUNK = 1 << 20
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError)
_ADVICE = "Delete the archive and download it again (or place a good copy by hand)."


class ArchiveError(ValueError):
    """A zip archive is corrupt, truncated or too large; the message says which."""


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


def _corrupt_member(zip_path: PathLike, name: str, error: BaseException) -> ArchiveError:
    return ArchiveError(
        f"{zip_path}: member {name!r} is corrupt ({type(error).__name__}: {error}); "
        "the archive is damaged or truncated. " + _ADVICE
    )
