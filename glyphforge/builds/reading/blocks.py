"""`BlockTable`: where each block of rows of each shard's arrays is, so that a reader inflates only those it needs.

A shard's bytes are a run of gzip members (`glyphforge.cache.npy_members`): a member of
the names and the first array's ``.npy`` header, then each array's rows in blocks of
`glyphforge.cache.declared.block_rows` rows, one member per block (the last block of a
shard may be short), a member of the next array's header before it. The builder writes the
entry's data file ``blocks.npy`` (:data:`BLOCKS_FILE`): a NumPy ``.npy`` file of one int64
array, for every shard in order, for each of its arrays (sorted by name)::

    start          # the array's first block's member starts at this byte of the shard's run
    end[0] ...     # and each of its blocks' members ends at these bytes

that is ``arrays * (blocks + 1)`` items a shard, where ``blocks`` is ``ceil(rows / block_rows)``
of the rows the index records: where a shard's items begin follows from the index alone. It
is listed in the manifest's files table (so ``cache verify`` re-hashes it, `entry_sha256` covers
it and every copy of the entry carries it), bounded in size by its manifest
(`glyphforge.cache.declared.blocks_sizes`), and each shard's items are checked
against the index when the shard is read (`BlockTable.shard`, which reads only them): increasing, after the first
member, ending where the shard's run ends. Each block's own gzip trailer (CRC-32 and size)
checks its bytes when it is inflated alone.

Every build since glyphforge 0.5 (``BUILD_FORMAT`` 4) has one; a manifest listing none is
refused (`glyphforge.cache.declared.built_problem`).
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from glyphforge.builds.reading.index import DamagedIndexError, ShardIndex
from glyphforge.cache import Entry
from glyphforge.cache.declared import BLOCKS_FILE, block_rows, shard_blocks

__all__ = ["BLOCKS_FILE", "BlockTable", "joined_table"]

#: The items of a block table: little-endian int64, as ``numpy.save`` writes them here.
_ITEM = np.dtype("<i8")
#: The shards whose items a `BlockTable` keeps once read (a few KB each at most, for up to 64 blocks of 8 arrays).
SHARDS_KEPT = 1024


class BlockTable:
    """The block table of a built entry (see the module docstring), checked shard by shard as it is read.

    Parameters
    ----------
    path
        The ``blocks.npy`` file (its items are read shard by shard: no mapping is held, no whole table read).
    index
        The entry's shard index (checked already).
    layout
        The entry's ``meta["layout"]``.
    where
        How errors name the entry.
    """

    def __init__(self, path: Path, index: ShardIndex, layout: Mapping[str, Any], where: str) -> None:
        self.rows = block_rows(layout)
        self.arrays = len(layout)
        self.path, self._index, self._where = path, index, where
        counts = self.arrays * (shard_blocks(index.rows, layout) + 1)
        self._first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        shape, dtype, self._data = self._header()
        self._items = lru_cache(maxsize=SHARDS_KEPT)(self._read)  # a stream reads each shard a block at a time
        if dtype != _ITEM or shape != (int(self._first[-1]),) or path.stat().st_size != self._data + 8 * shape[0]:
            raise self._damaged(f"holds {dtype} of shape {shape} in {path.stat().st_size:,} bytes, where its "
                                f"{len(index)} shards' blocks of {self.rows:,} rows of {self.arrays} arrays make "
                                f"{_ITEM} of shape ({int(self._first[-1])},)")

    @classmethod
    def of_entry(cls, entry: Entry, index: ShardIndex, where: str) -> BlockTable:
        """The block table of the built ``entry`` with the checked ``index`` (``where`` names it in errors): its
        `BLOCKS_FILE`, given by ``entry.file`` only at the size its manifest records."""
        return cls(entry.file(BLOCKS_FILE), index, entry.meta["layout"], where)

    def _header(self) -> tuple[tuple[int, ...], np.dtype[Any], int]:
        """The shape and dtype its ``.npy`` header declares, and where its items start."""
        try:
            with open(self.path, "rb") as stream:
                version = np.lib.format.read_magic(stream)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f".npy format version {version} (1.0 or 2.0 expected)")
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, fortran_order, dtype = read(stream)
                if fortran_order:
                    raise ValueError("its array is in Fortran order")
                return tuple(shape), dtype, stream.tell()
        except (ValueError, OSError, EOFError, SyntaxError, TokenError) as error:  # the last two: a damaged header
            raise self._damaged(f"cannot be read ({error})") from None

    def shard(self, number: int) -> np.ndarray:
        """Shard ``number``'s items, int64 of shape ``(arrays, blocks + 1)`` (see the module docstring), checked
        (read-only: those of the last `SHARDS_KEPT` shards read are kept).

        Raises
        ------
        DamagedIndexError
            They do not increase, start inside the run's first member, or end where the run does.
        """
        return self._items(number)

    def _read(self, number: int) -> np.ndarray:
        """Shard ``number``'s items, read from the file and checked (`shard`)."""
        first, stop = int(self._first[number]), int(self._first[number + 1])
        with open(self.path, "rb", buffering=0) as stream:
            stream.seek(self._data + 8 * first)
            raw = stream.read(8 * (stop - first))
        if len(raw) != 8 * (stop - first):
            raise self._damaged(f"ends before the blocks of shard {number} (it was cut since it was opened)")
        items = np.frombuffer(raw, _ITEM).astype(np.int64)
        length = int(self._index.length[number])
        if not (items[0] > 0 and bool(np.all(np.diff(items) > 0)) and items[-1] == length):
            raise self._damaged(f"records blocks of shard {number} at bytes {_shown(items)}, which do not follow each "
                                f"other through its {length:,} bytes")
        items.flags.writeable = False
        return items.reshape(self.arrays, -1)

    def _damaged(self, problem: str) -> DamagedIndexError:
        return DamagedIndexError(self._where, f"its block table {BLOCKS_FILE} {problem}")


def joined_table(shards: list[Any]) -> np.ndarray:
    """The items of a `BLOCKS_FILE` of shards whose tables (as `glyphforge.cache.npy_members.dump_shard` returns
    them, or their lists in a shard's record) are ``shards``, in order."""
    return np.concatenate([np.asarray(table, np.int64).reshape(-1) for table in shards])


def _shown(items: np.ndarray) -> str:
    """Some of ``items``, for a message."""
    shown = ", ".join(str(int(item)) for item in items[:8])
    return f"{shown}, ..." if len(items) > 8 else shown
