"""`ShardIndex`: where each shard of a built dataset is in ``arrays.pklz``, and which rows it holds.

The builder records it in the manifest's ``meta["index"]`` as four equal-length
lists, one item per shard in order::

    {"offset": [0, 491832, ...],   # the shard's gzip member starts at this byte
     "length": [491832, ...],      # and is this many bytes long
     "start":  [0, 1000, ...],     # it holds the rows [start, stop) of the dataset
     "stop":   [1000, 2000, ...]}

Entries built before the index existed (glyphforge 0.1) have ``meta["shard_bytes"]``
instead; their index is derived from it and from how the builder cuts shards
(``n_examples`` and ``shard_size`` are in the entry's parameters), without reading
the data file. An entry with neither says to build it again.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

INDEX_COLUMNS = ("offset", "length", "start", "stop")


@dataclass(frozen=True)
class ShardIndex:
    """Byte ranges and row ranges of every shard (int64 arrays of one item per shard)."""

    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray
    stop: np.ndarray

    @classmethod
    def from_lengths(cls, lengths: Any, rows: Any) -> ShardIndex:
        """Build the index of shards of ``lengths`` bytes holding ``rows`` rows each, in order."""
        length = np.asarray(lengths, np.int64)
        count = np.asarray(rows, np.int64)
        if length.shape != count.shape or length.ndim != 1:
            raise ValueError(f"{len(length)} member lengths do not pair with {len(count)} row counts")
        offset = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
        stop = np.cumsum(count).astype(np.int64)
        return cls(offset, length, stop - count, stop)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], params: Mapping[str, Any], where: str) -> ShardIndex:
        """Read the index of a built entry (``where`` names it in errors), deriving it for 0.1 entries."""
        if "index" in meta:
            columns = [np.asarray(meta["index"][name], np.int64) for name in INDEX_COLUMNS]
            return cls(*columns)
        if "shard_bytes" in meta and "shard_size" in params:
            n_examples, shard_size = int(meta["n_examples"]), int(params["shard_size"])
            starts = np.arange(0, n_examples, shard_size, dtype=np.int64)
            rows = np.minimum(starts + shard_size, n_examples) - starts
            return cls.from_lengths(meta["shard_bytes"], rows)
        raise ValueError(f"{where} has no shard index (it predates glyphforge 0.1's shard_bytes); remove it "
                         "with `glyphforge cache rm KEY` and build it again")

    def to_meta(self) -> dict[str, list[int]]:
        """Return the JSON form stored as ``meta["index"]``."""
        return {name: getattr(self, name).tolist() for name in INDEX_COLUMNS}

    def __len__(self) -> int:
        return len(self.offset)

    @property
    def n_examples(self) -> int:
        """The number of rows of all shards."""
        return int(self.stop[-1]) if len(self) else 0

    @property
    def rows(self) -> np.ndarray:
        """How many rows each shard holds."""
        return self.stop - self.start

    def shard_of(self, rows: np.ndarray) -> np.ndarray:
        """Return the shard holding each of ``rows`` (non-negative, in range: the caller checks)."""
        return np.searchsorted(self.stop, rows, side="right")

    def first_lost(self, size: int) -> int:
        """Return the first shard not wholly in the first ``size`` bytes of the data file (``len(self)``: none is)."""
        return int(np.searchsorted(self.offset + self.length, size, side="right"))

    def describe(self, first: int, last: int) -> str:
        """Name shards ``first`` to ``last`` and their rows: "shards 7 to 9 of 10 (examples 700 to 999)"."""
        shards = f"shard {first}" if first == last else f"shards {first} to {last}"
        return f"{shards} of {len(self)} (examples {self.start[first]} to {self.stop[last] - 1})"

    def check(self, n_examples: int, where: str) -> None:
        """Raise a ValueError naming ``where`` unless the index tiles ``n_examples`` rows and its bytes without gaps.

        A data file shorter than the index says still serves the shards it holds whole;
        reading the others names them (`glyphforge.builds.dataset.LostShardsError`).
        """
        tiles_bytes = len(self) > 0 and self.offset[0] == 0 and bool(
            np.all(self.offset[1:] == self.offset[:-1] + self.length[:-1]) and np.all(self.length > 0))
        tiles_rows = len(self) > 0 and self.start[0] == 0 and bool(
            np.all(self.start[1:] == self.stop[:-1]) and np.all(self.stop > self.start))
        if not (tiles_bytes and tiles_rows and self.n_examples == n_examples):
            raise ValueError(
                f"{where}: its shard index does not tile the data (it covers {self.n_examples} rows; the manifest "
                f"says {n_examples}). The entry is damaged: remove it with `glyphforge cache rm KEY` and build it "
                "again"
            )
