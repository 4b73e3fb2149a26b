"""IDX files (the MNIST/EMNIST array format), parsed with numpy and validated.

An IDX file is a big-endian header, ``0x00 0x00 <type> <ndim>`` then one uint32 per
dimension, followed by the array's bytes. Only unsigned-byte data is used here:
images (magic 2051 = ``0x0803``: count, rows, cols) and labels (magic 2049 =
``0x0801``: count).

The arrays are read with ``readinto`` straight into one preallocated numpy array, with
no intermediate copy. Gzipped files are decompressed with python-isal's ``igzip``
(about twice as fast as the standard library) when it is installed, else ``gzip``.

Everything wrong with a file raises :class:`IDXError` naming the file (the ``name``
given, e.g. the zip member and its archive) and what was wrong: a bad gzip stream, a
truncated or unexpected header, a wrong magic number or image size, fewer bytes than
the header declares, or bytes after the declared data.

Hostile headers
---------------
The header's dimensions are checked before anything is allocated, with Python
integers (a product of dimensions never wraps): the image size (``dims``), the count
(``cap``: the caller knows how many images a file may hold, e.g. an EMNIST split's)
and the data size (at most :data:`MAX_DATA_BYTES`). The array is then filled as the
data arrive, and reading stops one chunk past the declared size, so a file holding
more than it declares costs at most one chunk.
"""
from __future__ import annotations

import gzip
import math
import struct
import zlib
from typing import IO, NamedTuple, cast

import numpy as np
from isal import igzip, isal_zlib

from glyphforge.errors import IntegrityError

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
#: Refuse headers declaring more data than this (a corrupt count would allocate terabytes).
MAX_DATA_BYTES = 8 << 30

_CHUNK = 1 << 24
_ISAL_ERROR = cast("type[Exception]", isal_zlib.error)  # isal's stub calls it an instance
_GZIP_ERRORS: tuple[type[BaseException], ...] = (gzip.BadGzipFile, zlib.error, igzip.BadGzipFile, _ISAL_ERROR)


class IDXError(IntegrityError, ValueError):
    """An IDX file is corrupt, truncated or not what was expected; the message names it."""


class CountCap(NamedTuple):
    """The most images (or labels) a file may declare, and why: the reason ends the refusal's message.

    ``reason`` says where the number comes from and what to do, e.g. ``"EMNIST digits has
    40,000 test images ...: use NIST's gzip.zip"``.
    """

    limit: int
    reason: str


def read_images(
    stream: IO[bytes],
    name: str,
    *,
    gzipped: bool = True,
    dims: tuple[int, int] | None = (28, 28),
    cap: CountCap | None = None,
) -> np.ndarray:
    """Read an IDX image file (magic 2051).

    Parameters
    ----------
    stream
        A binary file object positioned at the start of the (gzipped) IDX file.
    name
        What to call the file in errors, e.g. the zip member's name.
    gzipped
        Whether ``stream`` is a gzip stream of the IDX bytes.
    dims
        The required ``(rows, cols)`` of every image; None accepts any.
    cap
        The most images the file may declare; None: only :data:`MAX_DATA_BYTES` bounds it.

    Returns
    -------
    numpy.ndarray
        uint8 array of shape ``(count, rows, cols)``, exactly as stored (writable).

    Raises
    ------
    IDXError
        When the file is not a complete image IDX file of the required dimensions, or
        its header declares more than ``cap`` images; nothing is allocated then.
    """
    return _read(stream, name, gzipped, IMAGES_MAGIC, ndim=3, dims=dims, cap=cap)


def read_labels(stream: IO[bytes], name: str, *, gzipped: bool = True, cap: CountCap | None = None) -> np.ndarray:
    """Read an IDX label file (magic 2049) as a uint8 vector; see :func:`read_images`."""
    return _read(stream, name, gzipped, LABELS_MAGIC, ndim=1, dims=None, cap=cap)


def _read(
    stream: IO[bytes], name: str, gzipped: bool, magic: int, ndim: int, dims: tuple[int, int] | None,
    cap: CountCap | None,
) -> np.ndarray:
    source: IO[bytes] = igzip.GzipFile(fileobj=stream, mode="rb") if gzipped else stream  # type: ignore[assignment]
    try:
        shape = _read_header(source, name, magic, ndim)
        _check_shape(name, shape, dims, cap)
        array = np.empty(shape, np.uint8)
        received = _fill(source, array.reshape(-1).data)
        if received < array.nbytes:
            raise IDXError(
                f"{name} is truncated: its header declares {_describe(shape)} "
                f"({array.nbytes:,} bytes of data) but only {received:,} bytes follow. "
                "The file is incomplete: get a complete copy"
            )
        extra = len(source.read(_CHUNK))
        if extra:
            raise IDXError(
                f"{name} has {'at least ' if extra == _CHUNK else ''}{extra:,} bytes after the "
                f"{array.nbytes:,} bytes of data its header declares ({_describe(shape)}): "
                "the header's count is wrong or the file is corrupt"
            )
    except EOFError as error:
        raise IDXError(
            f"{name} is truncated: its gzip stream ends early ({error}). The file is incomplete: get a complete copy"
        ) from error
    except _GZIP_ERRORS as error:
        raise IDXError(
            f"{name} is not a valid gzip stream ({type(error).__name__}: {error}): "
            "it is truncated or corrupt; get a complete copy"
        ) from error
    finally:
        if source is not stream:
            source.close()
    return array


def _read_header(source: IO[bytes], name: str, magic: int, ndim: int) -> tuple[int, ...]:
    size = 4 * (1 + ndim)
    header = source.read(4)
    found = struct.unpack(">I", header)[0] if len(header) == 4 else magic
    if found != magic:
        expected = "an image file" if magic == IMAGES_MAGIC else "a label file"
        known = {IMAGES_MAGIC: " (that of an image file)", LABELS_MAGIC: " (that of a label file)"}
        raise IDXError(
            f"{name} has magic number {found}{known.get(found, '')}, expected {magic} for "
            f"{expected}: the file is corrupt or not the file it should be"
        )
    header += source.read(size - len(header))
    if len(header) < size:
        raise IDXError(
            f"{name} is truncated: an IDX {'image' if ndim == 3 else 'label'} header needs "
            f"{size} bytes but the file holds only {len(header)}"
        )
    return tuple(struct.unpack(f">{ndim}I", header[4:]))


def _check_shape(name: str, shape: tuple[int, ...], dims: tuple[int, int] | None, cap: CountCap | None) -> None:
    """Refuse a declared shape of the wrong image size, or too large, before anything is allocated."""
    declared = math.prod(shape)  # Python integers: 2**22 * 2**21 * 2**21 does not wrap to 0
    if dims is not None and shape[1:] != tuple(dims):
        raise IDXError(
            f"{name} holds {shape[1]}x{shape[2]} images, expected {dims[0]}x{dims[1]} (its header declares "
            f"{_describe(shape)}, {declared:,} bytes): it is not an EMNIST/MNIST image file, or its header is "
            "corrupt; get a good copy"
        )
    if cap is not None and shape[0] > cap.limit:
        raise IDXError(
            f"{name} declares {_describe(shape)} ({declared:,} bytes), more than the {cap.limit:,} it may "
            f"hold: {cap.reason}"
        )
    if declared > MAX_DATA_BYTES:
        raise IDXError(
            f"{name} declares {_describe(shape)} ({declared:,} bytes), more than the "
            f"{MAX_DATA_BYTES:,}-byte cap: its header is corrupt; get a good copy"
        )


def _fill(source: IO[bytes], buffer: memoryview) -> int:
    """Read into ``buffer`` until it is full or the data ends; return the bytes read."""
    received = 0
    while received < len(buffer):
        count = source.readinto(buffer[received:received + _CHUNK])  # type: ignore[attr-defined]  # IO lacks readinto
        if not count:
            break
        received += count
    return received


def _describe(shape: tuple[int, ...]) -> str:
    if len(shape) == 3:
        return f"{shape[0]:,} images of {shape[1]}x{shape[2]}"
    return f"{shape[0]:,} labels"
