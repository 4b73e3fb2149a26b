"""A batch of a decoded copy's rows is checked with one CRC32 against its rows' recorded CRC32s combined.

`RowsCrc.of` must give zlib's CRC32 of the rows laid end to end, whatever their width and
count; `CopyArray.check_rows` must still name the one row of a batch that changed, in any of
its chunks of `MOST` rows, and pass the rows as recorded.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from glyphforge.builds.decoded_copy.crc_combine import MOST, RowsCrc
from glyphforge.builds.decoded_copy.rows import CopyArray, DamagedCopyError, row_sums


@pytest.mark.parametrize("width", [1, 3, 12, 4096, 6912])
def test_rows_laid_end_to_end_have_zlibs_crc32(width: int) -> None:
    rows = np.random.default_rng(width).integers(0, 256, (MOST, width), dtype=np.uint8)
    sums = np.array([zlib.crc32(row) for row in rows], np.uint32)
    combined = RowsCrc(width)
    for count in (0, 1, 2, 7, MOST - 1, MOST):
        assert combined.of(sums[:count]) == zlib.crc32(rows[:count])
    order = np.random.default_rng(0).permutation(MOST)[:100]
    assert combined.of(sums[order]) == zlib.crc32(rows[order])


def copy_array(recorded: np.ndarray, held: np.ndarray | None = None) -> CopyArray:
    """An array of a copy recorded as ``recorded``, holding ``held`` (default: the same) in memory, as a map is read."""
    held = recorded if held is None else held
    return CopyArray(Path("images.npy"), held.dtype, held.shape, 128, held.shape[1], zlib.crc32(recorded),
                     sums=row_sums(recorded), whole=held)


@pytest.mark.parametrize("changed", [0, MOST - 1, MOST, 599])
def test_a_changed_row_of_a_batch_is_named(changed: int) -> None:
    recorded = np.random.default_rng(1).integers(0, 256, (1000, 24), dtype=np.uint8)
    array = copy_array(recorded)
    rows = np.random.default_rng(2).permutation(1000)[:600]
    array.check_rows(rows, recorded[rows])  # as recorded: passes
    found = recorded[rows]
    found[changed, 5] ^= 0x10
    with pytest.raises(DamagedCopyError, match=f"has row {rows[changed]} changed"):
        array.check_rows(rows, found)
    damaged = recorded.copy()
    damaged[rows[changed], 20] ^= 1
    with pytest.raises(DamagedCopyError, match=f"has row {rows[changed]} changed"):
        copy_array(recorded, damaged).take(rows)


def test_two_rows_swapped_are_found() -> None:
    recorded = np.random.default_rng(3).integers(0, 256, (300, 48), dtype=np.uint8)
    array, rows = copy_array(recorded), np.arange(300)
    found = recorded.copy()
    found[[10, 11]] = found[[11, 10]]
    with pytest.raises(DamagedCopyError, match="has row 10 changed"):
        array.check_rows(rows, found)
