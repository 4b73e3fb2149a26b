"""What the parts of a built dataset's reader take: two narrow protocols, below every part.

A `~glyphforge.builds.reading.dataset.BuiltDataset` is identity, index and rows; its parts never
import it (as WebDataset's stages take an iterator and MosaicML's readers a shard):

* `ShardSource`: where the shards' bytes come from. An entry on disk reads its data files
  in place (`glyphforge.builds.reading.entry_files.EntryFiles`); an entry at a URL fetches each
  shard's byte range into the local shard cache (`glyphforge.builds.reading.remote_shards.RemoteShards`).
  The dataset is given one and reads every shard through it.
* `ShardReader`: what the stream (`glyphforge.builds.stream.stream`), the export
  (`glyphforge.builds.export.files`) and the decoded copy (`glyphforge.builds.decoded_copy.life`,
  `glyphforge.builds.decoded_copy.source`) read of a dataset: its identity, layout and index, shard
  ``N`` decoded or placed block by block, prefetch hints, its decoded copy's rows when it has
  one, and a reader of its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from glyphforge.builds.reading.blocks import BlockTable
from glyphforge.builds.reading.index import ShardIndex
from glyphforge.builds.reading.members import Member, Put, Scratch, Shard
from glyphforge.cache import Entry

__all__ = ["ARRAYS_FILE", "ShardReader", "ShardSource", "entry_blocks", "entry_index", "member_name", "read_member"]

#: The data file of an entry built on disk: every shard's run of gzip members, end to end.
ARRAYS_FILE = "arrays.pklz"

T = TypeVar("T")


class ShardSource(Protocol):
    """Where a built dataset's shards are read from (see the module docstring).

    A source pickles as a handle that opens its entry again (checking it is still the same
    key), so a dataset pickles as its source and its settings.
    """

    @property
    def entry(self) -> Entry:
        """The entry: its manifest, and its folder on this machine (where its decoded copy goes)."""

    @property
    def url(self) -> str | None:
        """The entry's URL when it is read where it lies at a URL; None for an entry on disk."""

    @property
    def index(self) -> ShardIndex:
        """Where each shard is and which rows it holds (read once, checked)."""

    def read(self, number: int, read: Callable[[Member], T]) -> T:
        """Return ``read(member)`` of shard ``number``'s gzip member (an IndexError out of range)."""

    def prefetch(self, shards: Iterable[int]) -> None:
        """Hint that ``shards`` will be read soon (a source at a URL fetches them ahead)."""

    def sibling(self) -> ShardSource:
        """A source of the same entry for another reader (sharing what may be shared, such as a fetcher)."""

    def close(self) -> None:
        """Stop what it runs (prefetch threads); a later read still works."""


class ShardReader(Protocol):
    """What a part of the reader (stream, export, decoded copy) reads of a built dataset."""

    cache_shards: int
    random_access: str
    decoded_budget: int | str | None

    @property
    def entry(self) -> Entry: ...

    @property
    def key(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def layout(self) -> dict[str, Any]: ...

    @property
    def index(self) -> ShardIndex: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def image_name(self) -> str: ...

    def __len__(self) -> int: ...

    def dtype(self, name: str) -> np.dtype[Any]: ...

    def shard(self, number: int) -> Shard:
        """Shard ``number``'s arrays, decoded whole."""

    def read_blocks(self, number: int, put: Put, scratch: Scratch, rows: tuple[int, int] | None = None) -> None:
        """Hand shard ``number``'s arrays to ``put`` a block of rows at a time (in ``scratch``'s buffers).

        ``rows`` (``(first, stop)``): at least those rows are handed over (the blocks holding
        them, or more); None: all of them.
        """

    def prefetch(self, shards: Any) -> None: ...

    def read_copy(self, read: Callable[[Any], T]) -> T | None:
        """``read(copy)`` of the entry's decoded copy when it has one (none is made); None: read the shards.

        None also with ``random_access="decode"``, and when ``read`` finds the copy damaged
        (`glyphforge.builds.decoded_copy.rows.DamagedCopyError`): it is dropped, with a WARNING.
        """

    def reopened(self, **options: Any) -> ShardReader:
        """A new reader of the same entry with other settings (``cache_shards=0``...)."""


def entry_index(entry: Entry) -> ShardIndex:
    """Read the shard index of the built ``entry`` (`ShardIndex.of_entry`), named by its data file in errors."""
    return ShardIndex.of_entry(entry, _where(entry))


def entry_blocks(entry: Entry, index: ShardIndex) -> BlockTable:
    """The block table of the built ``entry`` whose checked shard index is ``index`` (`BlockTable.of_entry`), named as
    `entry_index` names the entry."""
    return BlockTable.of_entry(entry, index, _where(entry))


def _where(entry: Entry) -> str:
    """How errors about the index or block table of ``entry`` name it: its data file (its folder, with parts)."""
    return str(entry.path if entry.meta.get("parts") else entry.path / ARRAYS_FILE)


def member_name(entry: Entry, index: ShardIndex, number: int) -> str:
    """The name of the entry's data file holding shard ``number``'s gzip member.

    ``arrays.pklz``, or for a multi-part entry (built into object storage, see
    `glyphforge.builds.reading.index`) ``meta["parts"][index.part[number]]``.
    """
    part = index.part
    return ARRAYS_FILE if part is None else str(entry.meta["parts"][int(part[number])])


def read_member(entry: Entry, index: ShardIndex, blocks: BlockTable, number: int,
                locate: Callable[[int], tuple[Path, int]], read: Callable[[Member], T]) -> T:
    """Return ``read(member)`` of shard ``number``, its run of members at ``locate(number)`` (a file and its first byte
    there), its blocks where ``blocks`` records them.

    Raises
    ------
    IndexError
        ``number`` is not a shard of the entry (before anything is located).
    DamagedIndexError
        ``blocks`` records the shard's blocks where they cannot be.
    """
    if not 0 <= number < len(index):
        raise IndexError(f"shard {number} is out of range: {entry.kind} {entry.key[:12]} has {len(index)}")
    shard_blocks = blocks.shard(number)
    path, offset = locate(number)
    return read(Member(path, offset, int(index.length[number]), entry.meta["layout"], int(index.rows[number]),
                       f"shard {number}", shard_blocks, blocks.rows))
