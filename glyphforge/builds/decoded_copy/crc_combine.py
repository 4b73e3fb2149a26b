"""The CRC32 of rows laid end to end, from each row's CRC32: a batch of rows checked with one CRC32 call.

A decoded copy records each row's CRC32 (`glyphforge.builds.decoded_copy.life`). A batch of rows
gathered into one buffer is checked with one CRC32 of the buffer against the CRC32 that rows
with the recorded checksums have laid end to end (`RowsCrc.of`), instead of one call per row
(a call costs about as much as a 7 KB row's CRC32 itself). CRC32 is linear over GF(2): the
CRC32 of ``a + b`` is the CRC32 of ``a`` multiplied by ``x**(8 * len(b))`` modulo the
polynomial, XOR the CRC32 of ``b`` (zlib's ``crc32_combine``). For rows of ``width`` bytes,
row ``j`` of ``k`` is shifted by ``k - 1 - j`` rows; each shift is a 32x32 bit matrix, kept as
8 tables of 16 values (one per 4 bits of a checksum: 128 KB for `MOST` rows, which stay in
the CPU's cache between batches where tables of 256 values, 1 MB, would not).
"""
from __future__ import annotations

import numpy as np

__all__ = ["MOST", "RowsCrc"]

#: The most rows one `RowsCrc.of` combines.
MOST = 256
_BITS = np.arange(32, dtype=np.uint32)
_NIBBLES = np.arange(8, dtype=np.uint32) * 4


def _apply(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``matrix`` (32 uint32 columns: the images of bits 0-31) applied to each of ``vectors`` (uint32)."""
    bits = ((vectors[..., None] >> _BITS) & 1).astype(bool)
    return np.bitwise_xor.reduce(np.where(bits, matrix, np.uint32(0)), axis=-1).astype(np.uint32)


def _shift(nbytes: int) -> np.ndarray:
    """The matrix multiplying a CRC32 by ``x**(8 * nbytes)`` modulo its (reflected) polynomial."""
    one_bit = np.concatenate([[np.uint32(0xEDB88320)], np.uint32(1) << _BITS[:31]]).astype(np.uint32)
    step, result = one_bit, np.uint32(1) << _BITS  # step: a shift by 2**i bits; result: the identity
    for _ in range(3):
        step = _apply(step, step)  # one zero byte
    while nbytes:
        if nbytes & 1:
            result = _apply(step, result)
        step, nbytes = _apply(step, step), nbytes >> 1
    return result


class RowsCrc:
    """The CRC32 of up to `MOST` rows of ``width`` bytes laid end to end, from each row's CRC32 (`of`)."""

    def __init__(self, width: int) -> None:
        columns, power = (np.uint32(1) << _BITS)[None], _shift(width)  # columns[j]: the matrix shifting by j rows
        while len(columns) < MOST:
            columns, power = np.concatenate([columns, _apply(power, columns)]), _apply(power, power)
        tables = np.zeros((MOST, 8, 16), np.uint32)  # tables[j, n, v]: bits 4n-4n+3 of a checksum being v, shifted
        by_nibble = columns.reshape(MOST, 8, 4)
        for bit in range(4):
            tables[:, :, 1 << bit:2 << bit] = tables[:, :, :1 << bit] ^ by_nibble[:, :, bit, None]
        self.width = width
        self._tables = tables.reshape(-1)
        # row j of k is shifted by k - 1 - j rows: its nibble n's table starts at (k - 1 - j) * 128 + n * 16
        self._starts = np.arange(MOST - 1, -1, -1, dtype=np.uint32)[:, None] * 128 + np.arange(8, dtype=np.uint32) * 16

    def of(self, sums: np.ndarray) -> int:
        """The CRC32 of the rows whose CRC32s are ``sums`` (uint32, at most `MOST`), laid end to end in that order."""
        places = (sums[:, None] >> _NIBBLES) & 0xF  # uint32 throughout: no int64 copy of the places
        places += self._starts[MOST - len(sums):]
        return int(np.bitwise_xor.reduce(self._tables.take(places), axis=None))
