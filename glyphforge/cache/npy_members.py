"""Gzip members of ``.npy`` arrays: how a built dataset's shards are stored.

A shard is a run of gzip members, end to end, that inflates (as one gzip stream) to a dict of
arrays as NumPy ``.npy`` files, one after the other: first the array of their names, sorted,
then each array in that order (a ``.npy`` header: dtype, shape, C order; then the array's
bytes). Its members (`dump_shard`): the names and the first array's header; then each
array's bytes, one member per block of `glyphforge.cache.declared.rows_per_block` rows (the
last block may be short), before each later array its header in a member of its own. So a
block of rows inflates alone, checked by its own CRC-32 (``blocks.npy`` says where each is:
`glyphforge.builds.reading.blocks`). Plain tools read a shard, and a file of shards joined
(a built dataset's ``arrays.pklz``) one after the other::

    with gzip.open(path) as stream:                     # or iter_members(path)
        names = numpy.lib.format.read_array(stream)
        shard = {name: numpy.lib.format.read_array(stream) for name in names}

The same arrays always give the same bytes (zlib, a gzip header with no file name and
mtime 0: `glyphforge.cache.pklz.zlib_member`).

No pickle is involved, so reading runs no code, and a reader inflates each array's bytes
into memory of its choosing: into fresh arrays (`ArraysMember.read_all`), or block by
block into a buffer it reuses (a stream placing rows into its window never holds a
decoded shard, and faults no fresh pages in for it). What a member holds is checked
against what the reader expects (names, dtypes, shapes, the gzip trailer, nothing
after), so a member can never make a reader allocate more than its layout declares.
"""
from __future__ import annotations

import functools
import io
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from glyphforge._checks import PathLike, check_int
from glyphforge._files import atomic_path
from glyphforge.cache.declared import rows_per_block
from glyphforge.cache.pklz import (
    DEFAULT_LEVEL,
    GZIP_ERRORS,
    DamagedPklzError,
    damaged_member,
    open_gzip_member,
    open_gzip_reader,
    zlib_member,
)
from glyphforge.cache.safe_pickle import MAX_INFLATION

#: The bytes of a ``.npy`` magic string with its version (``\x93NUMPY``, major, minor).
MAGIC_BYTES = len(np.lib.format.MAGIC_PREFIX) + 2
#: The longest ``.npy`` header read (numpy's own default bound for untrusted files).
MAX_HEADER = 10_000
#: What reading a damaged member's ``.npy`` header raises.
_HEADER_ERRORS: tuple[type[Exception], ...] = (ValueError, *GZIP_ERRORS)



class ArraySpec(NamedTuple):
    """What an array of a member must be: its dtype and its whole shape (rows first)."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def row_nbytes(self) -> int:
        """Bytes of one row (of one item along the first axis)."""
        return self.dtype.itemsize * math.prod(self.shape[1:])


def dump_shard(arrays: Mapping[str, np.ndarray], path: PathLike, level: int | None = None) -> np.ndarray:
    """Write ``arrays`` (sorted by name) as a run of gzip members, atomically; return where its blocks are.

    The run (see the module docstring) is: the names' ``.npy`` file and the first array's
    ``.npy`` header in one member; then each array's bytes, one member per block of
    `glyphforge.cache.declared.rows_per_block` rows (the last block may be short); before each
    later array, its ``.npy`` header in a member of its own.

    Parameters
    ----------
    arrays
        Numeric, bool or fixed-width string arrays (no object arrays) of the same rows, by name.
    path
        Destination file; replaced only once the new file is complete.
    level
        gzip level 0-9 (None: `glyphforge.cache.pklz.DEFAULT_LEVEL`), of zlib.

    Returns
    -------
    numpy.ndarray
        int64 of shape ``(arrays, blocks + 1)``: for each array in sorted order, the byte of the
        run where its first block's member starts, then where each of its blocks' members ends.
    """
    level = DEFAULT_LEVEL if level is None else check_int("level (the gzip level)", level, 0, 9)
    names = sorted(arrays)
    for name in names:
        if arrays[name].dtype.hasobject:
            raise TypeError(f"array {name!r} has dtype {arrays[name].dtype}: object arrays cannot be stored")
    rows = len(arrays[names[0]]) if names else 0
    step = rows_per_block(sum(_row_nbytes(arrays[name]) for name in names))
    table = np.empty((len(names), -(-rows // step) + 1), np.int64)
    with atomic_path(Path(path)) as temporary, open(temporary, "wb") as stream:
        head = io.BytesIO()
        np.lib.format.write_array(head, _names(arrays), allow_pickle=False)
        for number, name in enumerate(names):
            array = np.ascontiguousarray(arrays[name])
            np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(array))
            stream.write(zlib_member(head.getbuffer(), level))
            head = io.BytesIO()
            data, row_bytes = _bytes_of(array), _row_nbytes(array)
            table[number, 0] = stream.tell()
            for block, first in enumerate(range(0, rows, step), 1):
                stream.write(zlib_member(data[first * row_bytes:(first + step) * row_bytes], level))
                table[number, block] = stream.tell()
        if not names:
            stream.write(zlib_member(head.getbuffer(), level))
    return table


def _row_nbytes(array: np.ndarray) -> int:
    return int(array.dtype.itemsize * np.prod(array.shape[1:], dtype=np.int64))


def _bytes_of(array: np.ndarray) -> memoryview:
    """The bytes of the C-contiguous ``array``, as a flat view."""
    return array.reshape(-1).view(np.uint8).data


def _names(arrays: Mapping[str, Any]) -> np.ndarray:
    """The array of the sorted names of ``arrays``: a member's first ``.npy`` file."""
    return np.array(sorted(arrays), dtype=str)


def iter_members(path: PathLike) -> Iterator[dict[str, np.ndarray]]:
    """Yield the arrays of each member of a file of joined members (a built dataset's ``arrays.pklz``), in order.

    For looking at a file with nothing else at hand; a built dataset reads its shards
    with `ArraysMember`, checked against its layout.

    Raises
    ------
    DamagedPklzError
        The file does not inflate, or holds something else than such members.
    """
    room = MAX_INFLATION * Path(path).stat().st_size  # what the file can inflate to, at most

    def read_array(stream: Any) -> np.ndarray:
        nonlocal room
        shape, fortran_order, dtype = _read_header(stream)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if fortran_order or dtype.hasobject or nbytes > room:
            raise ValueError(f"an array is {dtype} of shape {shape}{' in Fortran order' if fortran_order else ''}, "
                             "which no member written by glyphforge holds")
        room -= nbytes
        array = np.empty(shape, dtype)
        if stream.readinto(array.data.cast("B")) != nbytes:
            raise EOFError("the file ends inside an array")
        return array

    with open_gzip_reader(Path(path)) as stream:
        try:
            while stream.peek(1):
                names = read_array(stream)
                if names.ndim != 1 or names.dtype.kind != "U":
                    raise ValueError(f"a member starts with {names.dtype} of shape {names.shape}, not its names")
                yield {str(name): read_array(stream) for name in names}
        except _HEADER_ERRORS as error:
            raise damaged_member(str(path), str(error)) from error


class ArraysMember:
    """One member being read: its arrays' headers, checked, then their bytes, in order (see the module docstring).

    Use it as a context manager. For each ``(name, spec)`` of `arrays` (the expected
    arrays, sorted by name), read that array's bytes with `read_into` (calls filling
    buffers of any sizes, together exactly the array's bytes) before asking for the next;
    `finish` then checks the member ends there (its CRC-32 and size are checked at its end).

    Parameters
    ----------
    raw
        The member's bytes (read in place: a ``bytearray`` or ``memoryview`` a caller reuses will do).
    expected
        The arrays it must hold, by name.
    source
        How errors name the member, e.g. ``"arrays.pklz: shard 3 (bytes 100 to 200)"``.

    Raises
    ------
    DamagedPklzError
        (from any method) The member does not inflate, or holds other arrays than expected,
        or bytes after them; the message names ``source`` and what was found.
    """

    def __init__(self, raw: Any, expected: Mapping[str, ArraySpec], source: str) -> None:
        self._stream: io.BufferedReader | Any = open_gzip_member(raw)
        self._expected = expected
        self.source = source
        self._left = 0  # bytes of the current array still to read
        self._room = MAX_INFLATION * len(memoryview(raw))  # what the member can inflate to, at most

    def __enter__(self) -> ArraysMember:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stream.close()

    def read_all(self) -> dict[str, np.ndarray]:
        """Read every array into fresh arrays (each inflated straight into its own memory), then `finish`."""
        arrays = {}
        for name, spec in self.arrays():
            arrays[name] = np.empty(spec.shape, spec.dtype)
            self.read_into(arrays[name])
        self.finish()
        return arrays

    def arrays(self) -> Iterator[tuple[str, ArraySpec]]:
        """Yield each expected array's name and spec once its header is read and checked, in sorted order.

        The member's names come first and must be the expected ones.
        """
        names = _names(self._expected)
        self._check_header("of names", ArraySpec(names.dtype, names.shape))
        self._left = self._claim(names.nbytes)
        found = np.empty_like(names)
        self.read_into(found)
        if not np.array_equal(found, names):
            raise self._damaged(f"it holds the arrays {found.tolist()}, not {names.tolist()}")
        for name in names.tolist():
            if self._left:
                raise RuntimeError(f"{self._left} bytes of the array before {name!r} are still to read")
            spec = self._expected[name]
            self._check_header(repr(name), spec)
            self._left = self._claim(int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize)
            yield name, spec

    def _claim(self, nbytes: int) -> int:
        """Count ``nbytes`` more inflated bytes: more than the member's compressed bytes can hold are refused."""
        if nbytes > self._room:
            raise self._damaged(f"its arrays declare more bytes than its compressed size can hold (deflate inflates "
                                f"at most {MAX_INFLATION} times): its index or layout lies")
        self._room -= nbytes
        return nbytes

    def _check_header(self, name: str, spec: ArraySpec) -> None:
        try:
            shape, fortran_order, dtype = _read_header(self._stream)
        except GZIP_ERRORS as error:
            raise self._damaged(f"it does not inflate ({error})") from error
        except ValueError as error:
            raise self._damaged(f"the array {name} has no readable .npy header ({error})") from error
        if (shape, fortran_order, dtype) != (spec.shape, False, spec.dtype):
            raise self._damaged(f"the array {name} is {dtype} of shape {shape}"
                                f"{' in Fortran order' if fortran_order else ''} where {spec.dtype} of shape "
                                f"{spec.shape} is expected")

    def read_into(self, buffer: np.ndarray) -> None:
        """Fill the C-contiguous ``buffer`` with the current array's next ``buffer.nbytes`` bytes."""
        view = buffer.data.cast("B")
        if len(view) > self._left:
            raise ValueError(f"{len(view)} bytes asked where the array has {self._left} left")
        try:
            while view:
                count = self._stream.readinto(view)
                if not count:
                    raise EOFError("the member ends inside an array")
                view, self._left = view[count:], self._left - count
        except GZIP_ERRORS as error:
            raise self._damaged(f"it does not inflate ({error})") from error

    def finish(self) -> None:
        """Check the member ends after its last array: its gzip trailer is checked there, nothing may follow."""
        if self._left:
            raise RuntimeError(f"{self._left} bytes of the last array are still to read")
        try:
            after = self._stream.read(1)
        except GZIP_ERRORS as error:
            raise self._damaged(f"its end does not inflate ({error})") from error
        if after:
            raise self._damaged("bytes follow its last array")

    def _damaged(self, what: str) -> DamagedPklzError:
        return damaged_member(self.source, what)


def _read_header(stream: Any) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """Read a ``.npy`` header (format 1.0 or 2.0): the array's shape, whether in Fortran order, and its dtype.

    Its bytes are read here and parsed by numpy once per distinct header (`_parsed_header`): a
    shard's arrays repeat their headers from shard to shard, and numpy's parse (``literal_eval``)
    costs about 60 us a header, some 6% of a stream's epoch.

    Raises
    ------
    ValueError
        It is not such a header (at most :data:`MAX_HEADER` bytes, parsed without running code).
    """
    magic = _read_exactly(stream, MAGIC_BYTES, "the .npy magic")
    version = np.lib.format.read_magic(io.BytesIO(magic))  # numpy's own check and words
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f".npy format version {version} (1.0 or 2.0 expected)")
    size = _read_exactly(stream, 2 if version == (1, 0) else 4, "the .npy header's length")
    length = int.from_bytes(size, "little")
    if length > MAX_HEADER:
        raise ValueError(f"a .npy header of {length:,} bytes (at most {MAX_HEADER:,} expected)")
    return _parsed_header(magic + size + _read_exactly(stream, length, "the .npy header"))


@functools.lru_cache(maxsize=256)
def _parsed_header(raw: bytes) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """numpy's parse of the whole ``.npy`` header ``raw`` (magic, length, dictionary): shape, Fortran order, dtype."""
    stream = io.BytesIO(raw)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(stream)  # its length bounded by `_read_header`
    return tuple(shape), bool(fortran_order), dtype


def _read_exactly(stream: Any, count: int, what: str) -> bytes:
    """The next ``count`` bytes of ``stream`` (a ValueError naming ``what`` if it ends first)."""
    data = stream.read(count)
    if len(data) != count:
        raise ValueError(f"the member ends inside {what}")
    return data
