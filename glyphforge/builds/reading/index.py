"""`ShardIndex`: where each shard of a built dataset is in ``arrays.pklz``, and which rows it holds.

The builder writes it as the entry's data file ``index.npy`` (:data:`INDEX_FILE`): a
NumPy ``.npy`` file of one int64 array of shape ``(4, n_shards)`` whose rows are, for
each shard in order::

    offset   # the shard's run of gzip members starts at this byte of arrays.pklz
    length   # and is this many bytes long
    start    # it holds the rows [start, stop) of the dataset
    stop

A *multi-part* entry (built into object storage, where the shards cannot be joined
without downloading them: `glyphforge.builds.making.url_build`) has a fifth row::

    part     # the shard's member is in data file meta["parts"][part], at offset

and ``offset`` counts from the start of that part (each part's members tile it from 0).
A 4-row index means every member is in ``arrays.pklz``.

Where each block of rows of a shard is in its run of members is the entry's other table,
``blocks.npy`` (`glyphforge.builds.reading.blocks`). The index is listed in the manifest's
files table like every data file (so ``cache verify`` re-hashes it and the manifest's
``entry_sha256`` covers it), and only a reader opens it: listing the cache parses a
manifest of a few hundred bytes, whatever the number of shards (1,000,000 shards in the
manifest's JSON were ~55 MB). It is read without pickles (``allow_pickle=False``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from glyphforge.cache import Entry
from glyphforge.cache.declared import INDEX_FILE, member_bounds, row_nbytes
from glyphforge.errors import IntegrityError

INDEX_COLUMNS = ("offset", "length", "start", "stop")
#: What to do about a damaged index of an entry on this machine's disk.
REBUILD = "The entry is damaged: remove it with `glyphforge cache rm KEY` and build it again"
#: The optional fifth row of a multi-part entry's index: which of ``meta["parts"]`` holds each shard.
PART_COLUMN = "part"


class DamagedIndexError(IntegrityError, ValueError):
    """A built entry's shard index cannot be read or does not fit the entry.

    ``where`` names the entry, ``problem`` says what is wrong and ``fix`` what to do (by
    default `REBUILD`, for an entry on disk; a reader of an entry at a URL says otherwise).
    """

    def __init__(self, where: str, problem: str, fix: str = REBUILD) -> None:
        super().__init__(f"{where}: {problem}. {fix}")
        self.where, self.problem, self.fix = where, problem, fix


@dataclass(frozen=True)
class ShardIndex:
    """Byte ranges and row ranges of every shard (int64 arrays of one item per shard).

    ``part`` is None for an entry whose members are all in ``arrays.pklz``, else the data
    file (an item of ``meta["parts"]``) holding each shard (see the module docstring).
    """

    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    part: np.ndarray | None = None

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
    def from_parts(cls, lengths: Any, rows: Any) -> ShardIndex:
        """Build the index of a multi-part entry whose shard ``i`` is alone in part ``i`` (``lengths`` bytes long)."""
        index = cls.from_lengths(lengths, rows)
        return cls(np.zeros(len(index), np.int64), index.length, index.start, index.stop,
                   np.arange(len(index), dtype=np.int64))

    @classmethod
    def of_entry(cls, entry: Entry, where: str) -> ShardIndex:
        """Read the index of the built ``entry`` (``where`` names it in errors): its `INDEX_FILE`.

        ``entry.file`` gives it only at the size the manifest records (which
        `glyphforge.cache.declared` bounds by the entry's shards). It is checked to tile the
        entry's rows and data (`check`), and each shard's length against its rows
        (`check_lengths`): no member read by it is larger than its rows' bytes stored, with
        their framing.
        """
        index, named = cls.read(entry.file(INDEX_FILE), where), f"its shard index {INDEX_FILE}"
        index.check(int(entry.meta["n_examples"]), where, entry.meta.get("parts"), named)
        index.check_lengths(entry.meta["layout"], where, named)
        return index

    @classmethod
    def read(cls, path: Path, where: str) -> ShardIndex:
        """Read an `INDEX_FILE`; a `DamagedIndexError` naming ``where`` when it is not a ``(4, n)`` or ``(5, n)`` int64
        array."""
        try:
            table = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError, SyntaxError, TokenError) as error:  # the last two: a damaged header
            raise DamagedIndexError(where, f"its shard index {path} cannot be read ({error})") from None
        rows = len(INDEX_COLUMNS)
        if table.dtype != np.int64 or table.ndim != 2 or table.shape[0] not in (rows, rows + 1):
            raise DamagedIndexError(where, f"its shard index {path} holds a {table.dtype} array of shape "
                                    f"{table.shape}, not int64 of shape ({rows}, shards), or ({rows + 1}, shards) "
                                    "for a multi-part entry")
        return cls(*table)

    def check_lengths(self, layout: Mapping[str, Any], where: str, named: str = "its shard index") -> None:
        """Raise a `DamagedIndexError` naming ``where`` (and the index as ``named``) unless every shard's member can
        hold its rows of ``layout`` (`glyphforge.cache.declared.member_bounds`): a reader allocates a member's
        length to read it."""
        row_bytes = row_nbytes(layout)
        fewest, most = member_bounds(self.rows, layout)
        wrong = np.flatnonzero((self.length < fewest) | (self.length > most))
        if len(wrong):
            shard = int(wrong[0])
            raise DamagedIndexError(where, f"{named} records shard {shard} as {int(self.length[shard]):,} "
                                    f"bytes for {int(self.rows[shard]):,} rows of {row_bytes:,} bytes, which "
                                    f"compress to {int(fewest[shard]):,} to {int(most[shard]):,} bytes")

    def table(self) -> np.ndarray:
        """The index as one int64 array of 4 rows (5 with ``part``), as `INDEX_FILE` holds it."""
        columns = [getattr(self, name) for name in INDEX_COLUMNS]
        return np.stack(columns if self.part is None else [*columns, self.part]).astype(np.int64)

    def write(self, path: Path) -> None:
        """Write the index as an `INDEX_FILE` at ``path``."""
        np.save(path, self.table(), allow_pickle=False)

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

    def shards_in_part(self, part: int) -> tuple[int, int]:
        """The first and last shard held by data file number ``part`` of a multi-part entry."""
        assert self.part is not None, "only a multi-part index has parts"
        first, stop = np.searchsorted(self.part, [part, part + 1])
        return int(first), int(stop) - 1

    def check(self, n_examples: int, where: str, parts: Any = None, named: str = "its shard index") -> None:
        """Raise a `DamagedIndexError` naming ``where`` (and the index as ``named``) unless the index tiles
        ``n_examples`` rows and its bytes.

        ``parts`` is the entry's ``meta["parts"]`` (None: a single ``arrays.pklz``): a
        multi-part index must have a ``part`` row naming them in order, each part's members
        tiling it from byte 0. A data file shorter than the index says still serves the
        shards it holds whole; reading the others names them
        (`glyphforge.builds.reading.entry_files.DamagedShardsError`).
        """
        if (parts is None) != (self.part is None):
            raise DamagedIndexError(where, f"{named} has {4 if self.part is None else 5} rows but its "
                                    f"manifest {'lists no' if parts is None else 'lists'} parts")
        if self.part is None:
            first_in_file = np.zeros(len(self), bool)
            first_in_file[:1] = True
        else:
            assert parts is not None
            steps = np.diff(self.part)
            in_order = bool(np.all((steps == 0) | (steps == 1)))
            if len(self) and not (in_order and self.part[0] == 0 and self.part[-1] == len(parts) - 1):
                raise DamagedIndexError(where, f"{named} does not name its {len(parts)} parts in order")
            first_in_file = np.concatenate([[True], steps == 1])
        follows = np.concatenate([[0], self.offset[:-1] + self.length[:-1]])
        tiles_bytes = len(self) > 0 and bool(
            np.all(self.offset == np.where(first_in_file, 0, follows)) and np.all(self.length > 0))
        tiles_rows = len(self) > 0 and self.start[0] == 0 and bool(
            np.all(self.start[1:] == self.stop[:-1]) and np.all(self.stop > self.start))
        if not (tiles_bytes and tiles_rows and self.n_examples == n_examples):
            raise DamagedIndexError(where, f"{named} does not tile the data (it covers {self.n_examples} "
                                    f"rows; the manifest says {n_examples})")
