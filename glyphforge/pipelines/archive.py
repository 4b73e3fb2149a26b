"""Safe zip reading: members by name, without extracting anything.

Every problem with an archive raises :class:`ArchiveError` naming the archive (and
the member), saying what is wrong and what to do:

* a truncated or corrupt archive (no central directory, bad CRC, broken deflate data);
* a member that is not stored or deflated (bzip2 and LZMA inflate without bound in
  one step), or is encrypted;
* zip bombs and lying headers.

Zip bombs
---------
Every read names a cap on the member's uncompressed bytes (``max_bytes``) fitting
what that member should hold (an EMNIST mapping file: 64 KiB; an Omniglot PNG:
1 MiB), and the member is checked twice:

* **before inflating**: the size the central directory declares must be within the
  cap, so a member declaring gigabytes is refused without inflating a byte;
* **while inflating**: the standard library's ``zipfile`` inflates at most one chunk
  at a time and never returns more than the declared size; it checks the CRC as
  that size is reached, so data inflating beyond it (a forged header) are refused as
  corrupt right there, and data ending before it as truncated.

:func:`read_member` and :func:`iter_members` read into one buffer of the declared
size, chunk by chunk, so a member is never held twice.

Speed
-----
Deflated members are inflated by python-isal's ``decompressobj`` (the same bytes as
zlib's, about twice as fast) inside ``zipfile``'s reader, so its bounds and CRC check
stay. :func:`open_member` inflates a large member (:data:`AHEAD_BYTES` or more) on a
thread of its own, a few chunks ahead of the reader: a gzip member inside a zip
(EMNIST's) is then inflated twice at once, on two cores.
"""
from __future__ import annotations

import io
import queue
import threading
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, cast

from isal import isal_zlib

from glyphforge._checks import PathLike, quote
from glyphforge.errors import IntegrityError

_CHUNK = 1 << 20
_ISAL_ERROR = cast("type[Exception]", isal_zlib.error)  # isal's stub calls it an instance
_CORRUPT: tuple[type[BaseException], ...] = (zipfile.BadZipFile, zlib.error, EOFError, _ISAL_ERROR)
_UNOPENED: tuple[type[BaseException], ...] = (*_CORRUPT, OSError)
#: Members of at least this many uncompressed bytes are inflated ahead of their reader, on a thread of their own.
AHEAD_BYTES = 8 << 20
#: How many chunks of :data:`_CHUNK` bytes the thread inflating ahead may hold ready.
_AHEAD_CHUNKS = 8
_ADVICE = "Delete the archive and download it again (or place a good copy by hand)."
#: The compression methods read: those whose inflation zipfile bounds per read.
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_OTHER_METHODS = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA", 9: "deflate64"}


class ArchiveError(IntegrityError, ValueError):
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
def open_member(zip_path: PathLike, name: str, *, max_bytes: int) -> Iterator[IO[bytes]]:
    """Open one member for streaming reads, without extracting anything.

    Use as ``with open_member(path, "gzip/emnist-digits-test-labels-idx1-ubyte.gz",
    max_bytes=cap) as stream: ...``. The member's declared size is checked against
    ``max_bytes`` first; the stream never yields more than that size. A CRC or
    decompression error raised while reading inside the ``with`` block is turned into
    :class:`ArchiveError` naming the archive and the member.

    Raises
    ------
    ArchiveError
        When the member is missing, declares more than ``max_bytes``, is compressed
        with another method than stored or deflate, or its data are corrupt.
    """
    with _open_zip(zip_path) as archive:
        info = _member_info(archive, zip_path, name)
        _check_member(zip_path, info, max_bytes)
        try:
            with _opened(archive, info) as stream:
                if info.file_size < AHEAD_BYTES:
                    yield stream
                else:
                    with _ReadAhead(stream) as ahead, io.BufferedReader(ahead, _CHUNK) as buffered:
                        yield buffered
        except _CORRUPT as error:
            raise _corrupt_member(zip_path, name, error) from error


def read_member(zip_path: PathLike, name: str, *, max_bytes: int) -> bytearray:
    """Return the uncompressed bytes of one member.

    Parameters
    ----------
    zip_path
        The archive.
    name
        The member's full name inside the archive, e.g. ``"gzip/emnist-letters-mapping.txt"``.
    max_bytes
        Refuse a member declaring more than this, before inflating it; choose what the
        member may hold (see the module docstring).

    Returns
    -------
    bytearray
        The member's bytes, read into one buffer of its declared size.

    Raises
    ------
    ArchiveError
        When the member is missing, too large, or its data are corrupt or truncated.
    """
    with _open_zip(zip_path) as archive:
        return _read_info(archive, zip_path, _member_info(archive, zip_path, name), max_bytes)


def iter_members(
    zip_path: PathLike,
    names: Iterable[str] | None = None,
    *,
    max_bytes: int,
) -> Iterator[tuple[str, bytearray]]:
    """Yield ``(name, bytes)`` for many members, opening the archive only once.

    Parameters
    ----------
    zip_path
        The archive.
    names
        The members to read, in this order; default: every file member in archive order.
    max_bytes
        Cap on the size of each member, as in :func:`read_member`.
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
    except _UNOPENED as error:
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
        sample = ", ".join(quote(n) for n in archive.namelist()[:5])
        raise ArchiveError(
            f"{zip_path} has no member {quote(name)} (it holds {len(archive.namelist())} members, "
            f"e.g. {sample}). Check the member name, or that this is the right archive."
        ) from None


def _read_info(archive: zipfile.ZipFile, zip_path: PathLike, info: zipfile.ZipInfo, max_bytes: int) -> bytearray:
    """Read one checked member into a buffer of its declared size, a chunk at a time."""
    _check_member(zip_path, info, max_bytes)
    data = bytearray(info.file_size)
    received = 0
    try:
        with _opened(archive, info) as stream, memoryview(data) as view:
            while received < len(data):
                count = stream.readinto(view[received:received + _CHUNK])  # type: ignore[attr-defined]  # IO lacks it
                if not count:
                    break
                received += count
    except _CORRUPT as error:
        raise _corrupt_member(zip_path, info.filename, error) from error
    if received < len(data):
        raise ArchiveError(
            f"{zip_path}: member {quote(info.filename)} ends after {received:,} bytes, but its header declares "
            f"{len(data):,}: the archive is truncated, damaged or forged. " + _ADVICE
        )
    return data


@contextmanager
def _opened(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    """``archive.open(info)``, a deflated member inflated by isal (where the reader has the decompressor it uses)."""
    with archive.open(info) as stream:
        if info.compress_type == zipfile.ZIP_DEFLATED and hasattr(stream, "_decompressor"):
            setattr(stream, "_decompressor", isal_zlib.decompressobj(-zlib.MAX_WBITS))  # noqa: B010 - nothing read yet
        yield stream


class _ReadAhead(io.RawIOBase):
    """The bytes of ``stream``, read on a thread of its own up to :data:`_AHEAD_CHUNKS` chunks ahead.

    An error reading ``stream`` is raised by the read that reaches it. Closing stops the
    thread (and waits for it) before ``stream`` may be closed.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._ready: queue.Queue[bytes | BaseException] = queue.Queue(_AHEAD_CHUNKS)
        self._stop = threading.Event()
        self._current, self._ended = memoryview(b""), False
        self._thread = threading.Thread(target=self._inflate, args=(stream,), name="zip-read-ahead", daemon=True)
        self._thread.start()

    def _inflate(self, stream: IO[bytes]) -> None:
        try:
            while not self._stop.is_set():
                data = stream.read(_CHUNK)
                self._hand_over(data)
                if not data:
                    return
        except BaseException as error:  # noqa: BLE001 - raised again by the reader's thread
            self._hand_over(error)

    def _hand_over(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._current and not self._ended:
            item = self._ready.get()
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            self._ended = not item
            self._current = memoryview(item)
        count = min(len(buffer), len(self._current))
        memoryview(buffer).cast("B")[:count] = self._current[:count]
        self._current = self._current[count:]
        return count

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        super().close()


def _check_member(zip_path: PathLike, info: zipfile.ZipInfo, max_bytes: int) -> None:
    """Refuse, before inflating anything, a member too large, encrypted or compressed with an unbounded method."""
    where = f"{zip_path}: member {quote(info.filename)}"
    if info.file_size > max_bytes:
        raise ArchiveError(
            f"{where} declares {info.file_size:,} uncompressed bytes, more than the {max_bytes:,} bytes such a "
            "member may hold: a zip bomb, or not the archive it should be. " + _ADVICE
        )
    if info.compress_type not in _METHODS:
        method = _OTHER_METHODS.get(info.compress_type, "an unknown method")
        raise ArchiveError(
            f"{where} is compressed with {method} (zip method {info.compress_type}); only stored and deflate "
            "members are read (the upstream archives use them): this is not the archive it should be. " + _ADVICE
        )
    if info.flag_bits & 0x1:
        raise ArchiveError(f"{where} is encrypted: this is not the archive it should be. " + _ADVICE)


def _corrupt_member(zip_path: PathLike, name: str, error: BaseException) -> ArchiveError:
    inflating = isinstance(error, _ISAL_ERROR)
    kind = "error" if inflating else type(error).__name__  # an inflate error is named as zlib names it
    return ArchiveError(
        f"{zip_path}: member {quote(name)} is corrupt ({kind}: {quote(str(error))}); "
        "the archive is damaged, truncated or forged (its headers do not match its data). " + _ADVICE
    )
