"""Gzipped dill pickles (``.pklz``): writing, safe reading, multi-member files.

A ``.pklz`` file is a standard gzip stream of ``dill.dumps(obj, protocol=5)``,
readable by plain ``gzip.open`` + ``dill.load``; one numpy array written by
:func:`write_array_pklz` is ``pickle.dumps(array, protocol=5)`` instead (numpy's own
reducer: the data in one ``BYTEARRAY8`` block, which a reader inflates straight into the
bytearray the array is made over, with no further copy). The same object always gives the
same bytes (entries are byte-identical on every run, session and worker count): the
whole pickle is deflated by one call of python-isal's ``isal_zlib.compress`` (raw
deflate, :func:`gzip_member`), between a fixed 10-byte gzip header (no file name,
mtime 0) and the CRC-32 and size. isal deflates 3-5 times faster than zlib at level 1
and compresses these images as well, and one call over the same bytes gives the same
stream (``benchmarks/bench_pklz_codecs.py``: thousands of writes between writes of
other data, on threads and in other processes, all equal). What must not be done is
streaming a pickle into isal as the pickler writes it: isal's stream depends on where
its input is cut into calls, and streamed pickles in build workers came out differently
about once in 160 times. Shards (`glyphforge.cache.npy_members`), runs of members of
blocks of their arrays, are deflated by zlib (:func:`zlib_member`), whose output depends
only on the bytes it is given. A file may hold several gzip members, each one pickle or one
shard (the parallel builder joins shard files that way); :func:`iter_pklz` yields
the pickles in order.

Reading inflates with python-isal (``isal.igzip``, several times faster than zlib and
byte-compatible) when it is installed, else the standard library.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import dill
import numpy as np
from isal import igzip, isal_zlib

from glyphforge._checks import PathLike, check_int
from glyphforge._files import atomic_path
from glyphforge.cache.safe_pickle import Budget, RestrictedUnpickler, UnsafePickleError
from glyphforge.errors import IntegrityError

PICKLE_PROTOCOL = 5
DEFAULT_LEVEL = 1
"""Default deflate level of a ``.pklz`` (isal's, 0-3) and of a shard member (zlib's, 0-9): fast writes (zlib
level 9 wrote 5.5 MB/s here, level 1 157 MB/s for a file only 13% larger; on EMNIST images isal level 1 deflates
3-5 times faster than zlib level 1 into files as small)."""
#: The highest deflate level of a ``.pklz`` (isal's levels are 0-3).
MAX_PKLZ_LEVEL = 3
#: The gzip header of every ``.pklz`` member: deflate, no flags (no file name), mtime 0, no extra flags, OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

#: Bytes `concat_pklz` reads and writes at a time (large blocks: few system calls).
JOIN_BLOCK = 1 << 24
#: Bytes `dump_pklz` writes at a time (several system calls, as a streamed write makes).
WRITE_BLOCK = 1 << 22


class DamagedPklzError(IntegrityError, ValueError):
    """A ``.pklz`` file is truncated or damaged (its gzip stream does not decode)."""


#: What inflating a damaged or truncated (``EOFError``) gzip stream raises.
GZIP_ERRORS: tuple[type[Exception], ...] = (EOFError, gzip.BadGzipFile, zlib.error,
                                            cast("type[Exception]", isal_zlib.error))  # isal's stub: an instance
#: What loading a pickle from a damaged or truncated gzip stream raises.
_LOAD_ERRORS: tuple[type[Exception], ...] = (*GZIP_ERRORS, pickle.UnpicklingError)


def open_gzip_reader(path: Path) -> gzip.GzipFile:
    stream: gzip.GzipFile = igzip.open(path, "rb")
    return stream


def open_gzip_member(raw: Any) -> gzip.GzipFile | io.BufferedReader:
    """A stream of the inflated bytes of the gzip member(s) ``raw``: bytes, or a binary file (left open).

    isal's C reader (``isal_zlib._GzipReader``, as ``isal.igzip`` uses it; given bytes, it
    reads them in place) behind a ``BufferedReader`` inflates a large ``readinto`` straight
    into the caller's buffer (``isal.igzip``'s file object inflates into a copy first, as
    ``gzip.GzipFile``, used without isal, does).
    """
    reader = getattr(isal_zlib, "_GzipReader", None)
    if reader is None:  # isal before 1.5 has no C reader
        return gzip.GzipFile(fileobj=raw if hasattr(raw, "read") else io.BytesIO(raw), mode="rb")
    return io.BufferedReader(reader(raw))


class _BoundedReader:
    """What an unpickler reads from: a decompressing stream that gives at most ``budget.limit`` bytes in all.

    A gzip stream inflating beyond its budget (a few KB declaring a few GB) is stopped
    there with `OversizedPickleError`, before the bytes are decompressed.
    """

    def __init__(self, stream: gzip.GzipFile | io.BufferedReader, budget: Budget, source: str) -> None:
        self._stream, self._budget, self._source = stream, budget, source
        self._left = budget.limit

    def _spend(self, count: int) -> None:
        if count > self._left:
            raise self._budget.refusal(self._source, "its gzip data inflates to more bytes than allowed")
        self._left -= count

    # Each read asks the stream for at most one byte more than is left: getting it means too much.
    def read(self, n: int = -1, /) -> bytes:
        data = self._stream.read(self._left + 1 if n < 0 else min(n, self._left + 1))
        self._spend(len(data))
        return data

    def readinto(self, buffer: Any, /) -> int:
        count = self._stream.readinto(memoryview(buffer).cast("B")[: self._left + 1])
        self._spend(count)
        return count

    def readline(self) -> bytes:
        line = self._stream.readline(self._left + 1)
        self._spend(len(line))
        return line

    def peek(self, n: int, /) -> bytes:
        return self._stream.peek(n)


def dump_pklz(obj: Any, path: PathLike, level: int | None = None) -> Path:
    """Write ``obj`` as a gzipped dill pickle, atomically.

    The pickle is made whole in memory, then deflated by one call (:func:`gzip_member`):
    an object of N bytes needs about 2N more while it is written.

    Parameters
    ----------
    obj
        Anything dill can pickle (arrays, dicts of arrays, ...).
    path
        Destination file; replaced only once the new file is complete.
    level
        isal's deflate level 0-3 (None: :data:`DEFAULT_LEVEL`).

    Returns
    -------
    Path
        The written path.
    """
    write_pklz(obj, path, level)
    return Path(path)


def write_pklz(obj: Any, path: PathLike, level: int | None = None) -> str:
    """:func:`dump_pklz`, returning the written file's sha256 (of the bytes written: the file is not read again)."""
    level = DEFAULT_LEVEL if level is None else check_int("level (isal's deflate level)", level, 0, MAX_PKLZ_LEVEL)
    return _write_member(gzip_member(dill.dumps(obj, protocol=PICKLE_PROTOCOL), level), path)


def _write_member(data: bytes, path: PathLike) -> str:
    """Write the gzip member ``data`` as ``path``, atomically; return its sha256."""
    member = memoryview(data)
    digest = hashlib.sha256(member)
    with atomic_path(Path(path)) as temporary, open(temporary, "wb") as out:
        for start in range(0, len(member), WRITE_BLOCK):
            out.write(member[start:start + WRITE_BLOCK])
    return digest.hexdigest()


def write_array_pklz(path: PathLike, shape: tuple[int, ...], dtype: np.dtype[Any] | type,
                     fill: Callable[[np.ndarray], None], level: int | None = None) -> str:
    """Write the C-contiguous array of ``shape`` and ``dtype`` that ``fill`` fills as a ``.pklz``, atomically; return
    its sha256.

    The file holds ``pickle.dumps(array, protocol=5)``: the pickle is laid out first and
    ``fill`` writes the array's values in place inside it (:func:`array_pickle`), so the
    data is copied once. ``level``: as :func:`dump_pklz`'s.
    """
    level = DEFAULT_LEVEL if level is None else check_int("level (isal's deflate level)", level, 0, MAX_PKLZ_LEVEL)
    return _write_member(gzip_member(array_pickle(shape, dtype, fill), level), path)


def array_pickle(shape: tuple[int, ...], dtype: np.dtype[Any] | type, fill: Callable[[np.ndarray], None]
                 ) -> bytes | memoryview:
    """``pickle.dumps(array, protocol=5)`` of the C-contiguous array of ``shape`` and ``dtype`` that ``fill`` fills.

    The pickler is run once over an unfilled stand-in, writing to a list: an array of at
    least 64 KiB reaches it as one separate block (CPython's pickler writes such buffers
    outside its frames), so what comes before and after it is the pickle's head and tail
    for any values; ``fill`` then fills the array viewed inside the laid-out pickle. A
    smaller array is filled, then pickled.
    """
    stand_in = np.empty(shape, dtype)
    pieces: list[Any] = []
    pickle.Pickler(_Pieces(pieces), protocol=PICKLE_PROTOCOL).dump(stand_in)
    blocks = [index for index, piece in enumerate(pieces) if isinstance(piece, pickle.PickleBuffer)]
    if not blocks:
        fill(stand_in)
        return pickle.dumps(stand_in, protocol=PICKLE_PROTOCOL)
    [block] = blocks
    head, tail = b"".join(pieces[:block]), b"".join(pieces[block + 1:])
    whole = np.empty(len(head) + stand_in.nbytes + len(tail), np.uint8)  # not zeroed first: every byte is written
    whole[:len(head)], whole[len(whole) - len(tail):] = np.frombuffer(head, np.uint8), np.frombuffer(tail, np.uint8)
    fill(whole[len(head):len(head) + stand_in.nbytes].view(stand_in.dtype).reshape(shape))
    return whole.data


class _Pieces:
    """A file for a pickler that keeps what it is given: bytes copied, a buffer block as it is (not read)."""

    def __init__(self, pieces: list[Any]) -> None:
        self._pieces = pieces

    def write(self, data: Any) -> int:
        self._pieces.append(data if isinstance(data, pickle.PickleBuffer) else bytes(data))
        return memoryview(data).nbytes


def gzip_member(data: bytes | memoryview, level: int) -> bytes:
    """One gzip member of ``data``: :data:`GZIP_HEADER`, the raw deflate of all of ``data`` by one call of isal at
    ``level`` (0-3), then the CRC-32 and size. The same bytes always give the same member (see the module docstring).
    """
    return _framed(isal_zlib.compress(data, level, wbits=-zlib.MAX_WBITS), data)


def zlib_member(data: Any, level: int) -> bytes:
    """One gzip member of ``data`` (bytes-like) as `gzip_member` frames it, deflated by zlib at ``level`` (0-9): a
    shard's blocks (`glyphforge.cache.npy_members`)."""
    return _framed(zlib.compress(data, level, wbits=-zlib.MAX_WBITS), data)


def _framed(deflated: bytes, data: Any) -> bytes:
    """The gzip member of ``data`` whose raw deflate is ``deflated``: :data:`GZIP_HEADER`, it, the CRC-32 and size."""
    size = memoryview(data).nbytes
    return b"".join((GZIP_HEADER, deflated, struct.pack("<II", isal_zlib.crc32(data), size & 0xFFFFFFFF)))


def iter_pklz(path: PathLike, trusted: bool = False, budget: Budget | None = None) -> Iterator[Any]:
    """Yield every pickle of a (possibly multi-member) ``.pklz`` file, in order.

    Parameters
    ----------
    path
        The file.
    trusted
        False (default): refuse any global that is not plain data
        (:class:`~glyphforge.cache.UnsafePickleError`). True: plain dill.
    budget
        The most bytes the whole file may inflate to and (unless ``trusted``) its
        pickles ask to allocate; beyond it `OversizedPickleError`. None: what the
        file's compressed size can hold (`Budget.for_compressed`).
    """
    path = Path(path)
    budget = budget or Budget.for_compressed(path.stat().st_size)
    with open(path, "rb") as raw, open_gzip_member(raw) as stream:  # an array's data inflate straight into it
        reader = _BoundedReader(stream, budget, str(path))
        unpickler = dill.Unpickler(reader) if trusted else RestrictedUnpickler(reader, str(path), budget)
        while True:
            try:
                if not reader.peek(1):
                    return
                item = unpickler.load()
            except UnsafePickleError:
                raise
            except MemoryError as error:  # a count in the pickle (a bytearray's size) is allocated before it is read
                raise budget.refusal(str(path), "a pickle in it asks for more memory than this machine can give") \
                    from error
            except _LOAD_ERRORS as error:
                raise DamagedPklzError(
                    f"{path} is truncated or damaged ({error}). If it is a cache file, `glyphforge cache verify` "
                    "lists such files and `glyphforge cache gc` removes their entries; then prepare or build again"
                ) from error
            yield item


def load_pklz(path: PathLike, trusted: bool = False) -> Any:
    """Load the single pickle of a ``.pklz`` file (see :func:`iter_pklz`)."""
    objects = list(iter_pklz(path, trusted=trusted))
    if len(objects) != 1:
        raise ValueError(
            f"{path} holds {len(objects)} pickles, expected exactly 1; "
            "read multi-member files with iter_pklz"
        )
    return objects[0]


@dataclass(frozen=True)
class Joined:
    """What :func:`concat_pklz` wrote: the file, its sha256 and each member's byte length."""

    path: Path
    sha256: str
    lengths: tuple[int, ...]


class MemberMismatchError(DamagedPklzError):
    """A file given to :func:`concat_pklz` no longer has the sha256 it was recorded with."""

    def __init__(self, index: int, message: str) -> None:
        self.index = index
        super().__init__(message)


def concat_pklz(
    sources: Sequence[PathLike], dest: PathLike, *, expected_sha256: Sequence[str | None] | None = None
) -> Joined:
    """Join ``.pklz`` files into one multi-member file without recompressing, hashing as it copies.

    Each source is read once, in blocks of :data:`JOIN_BLOCK` bytes: the same bytes feed
    the destination's sha256 (so committing it need not read it again) and, where
    ``expected_sha256`` gives one, the source's own sha256. The destination appears
    atomically, once complete.

    Raises
    ------
    MemberMismatchError
        A source's sha256 differs from ``expected_sha256`` (its ``index`` says which);
        the destination is not written.
    """
    dest = Path(dest)
    whole = hashlib.sha256()
    lengths = []
    buffer = bytearray(JOIN_BLOCK)
    view = memoryview(buffer)
    with atomic_path(dest) as temporary, open(temporary, "wb") as out:
        for index, source in enumerate(sources):
            expected = None if expected_sha256 is None else expected_sha256[index]
            own = hashlib.sha256() if expected is not None else None
            length = 0
            with open(source, "rb", buffering=0) as part:
                while count := part.readinto(buffer):
                    block = view[:count]
                    whole.update(block)
                    if own is not None:
                        own.update(block)
                    out.write(block)
                    length += count
            if own is not None and own.hexdigest() != expected:
                raise MemberMismatchError(
                    index, f"{source} has sha256 {own.hexdigest()}, but it was recorded as {expected}: it changed "
                    "on disk after it was written"
                )
            lengths.append(length)
    return Joined(dest, whole.hexdigest(), tuple(lengths))


def damaged_member(source: str, what: str) -> DamagedPklzError:
    """The error for the member ``source`` (file, what and bytes) that is truncated or damaged: ``what`` says how."""
    return DamagedPklzError(
        f"{source} is truncated or damaged ({what}). "
        "`glyphforge cache verify` lists such files; remove the entry (`glyphforge cache rm KEY`) and build again")

