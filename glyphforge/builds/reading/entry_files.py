"""`EntryFiles`: the shard source of a built entry on disk, its data files read in place.

A shard is one run of gzip members of ``arrays.pklz`` (or, for an entry built into object storage
and then copied to disk, of the part ``meta["parts"]`` names), read at the offset the index
records. A truncated ``arrays.pklz`` still serves the shards it holds whole; a shard past its
end, or in a part that is missing or not its recorded size, raises an error naming every
shard lost (`DamagedShardsError`).
"""
from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from glyphforge.builds.reading.blocks import BlockTable
from glyphforge.builds.reading.index import ShardIndex
from glyphforge.builds.reading.members import Member
from glyphforge.builds.reading.protocols import ARRAYS_FILE, entry_blocks, entry_index, member_name, read_member
from glyphforge.cache import DamagedEntryFileError, Entry, MissingEntryFileError
from glyphforge.cache.entry import read_entry

__all__ = ["EntryFiles", "DamagedShardsError", "lost_shards"]

T = TypeVar("T")


class DamagedShardsError(DamagedEntryFileError):
    """A shard was read past the end of a truncated ``arrays.pklz``; the message names every shard lost."""


class EntryFiles:
    """The shard source (`glyphforge.builds.reading.protocols.ShardSource`) of the built ``entry`` on disk.

    It pickles as the entry's path and key (opened again, and checked to be that key, when unpickled).
    """

    url: str | None = None

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._index: ShardIndex | None = None
        self._blocks: BlockTable | None = None

    @property
    def index(self) -> ShardIndex:
        """Where each shard is in ``arrays.pklz`` and which rows it holds (checked against the file)."""
        if self._index is None:
            self._index = entry_index(self.entry)
        return self._index

    @property
    def blocks(self) -> BlockTable:
        """Where each block of each shard is (its header read once, each shard's items when it is read)."""
        if self._blocks is None:
            self._blocks = entry_blocks(self.entry, self.index)
        return self._blocks

    def read(self, number: int, read: Callable[[Member], T]) -> T:
        """Return ``read(member)`` of shard ``number``'s run of members."""
        return read_member(self.entry, self.index, self.blocks, number, self._member, read)

    def _member(self, number: int) -> tuple[Path, int]:
        """Where shard ``number``'s gzip member is: the file to read it from and its first byte there."""
        return self._arrays_file(number), int(self.index.offset[number])

    def _arrays_file(self, number: int) -> Path:
        """The file to read shard ``number`` from: a truncated one still serves the shards it holds whole.

        Raises
        ------
        DamagedShardsError
            Shard ``number`` is past the end of a truncated file (the message names every lost shard).
        DamagedEntryFileError, MissingEntryFileError
            The file is longer than its manifest records, or missing (see `Entry.file`).
        """
        if self.index.part is not None:
            return self._part_file(number)
        try:
            return self.entry.file(ARRAYS_FILE)
        except DamagedEntryFileError as error:
            lost = lost_shards(self.entry, error.size)
            if lost is None:
                raise
            if number < self.index.first_lost(error.size):
                return error.path
            raise DamagedShardsError(
                f"{error.path} is truncated: {error.size:,} bytes where the {self.entry.kind} entry "
                f"{self.entry.key[:12]}'s manifest records {error.expected:,}, so shard {number} is lost. {lost}. Run "
                "`glyphforge cache gc` to remove the entry, then build it again: the build makes its shards again",
                error.path, error.size, error.expected) from None

    def _part_file(self, number: int) -> Path:
        """The part of a multi-part entry holding shard ``number``.

        Raises
        ------
        DamagedShardsError, MissingEntryFileError
            The part is not the size its manifest records, or missing: the message names it and the shards it held.
        """
        name = member_name(self.entry, self.index, number)
        try:
            return self.entry.file(name)
        except DamagedEntryFileError as error:
            what = f"{error.size:,} bytes where the manifest records {error.expected:,}"
            raise DamagedShardsError(self._lost_part(number, what), error.path, error.size, error.expected) from None
        except MissingEntryFileError:
            missing = self._lost_part(number, "missing")
            raise MissingEntryFileError(errno.ENOENT, missing, str(self.entry.path / name)) from None

    def _lost_part(self, number: int, what: str) -> str:
        """Say that the part holding shard ``number`` is ``what`` (missing, short...), naming the shards it held."""
        index = self.index
        assert index.part is not None, "only a multi-part entry has parts"
        lost = index.describe(*index.shards_in_part(int(index.part[number])))
        return (f"{self.entry.path / member_name(self.entry, index, number)} ({what}) is the part of the "
                f"{self.entry.kind} entry {self.entry.key[:12]} that held {lost}: they are lost. Run `glyphforge cache "
                "gc` to remove the entry, then build it again")

    def prefetch(self, shards: Iterable[int]) -> None:
        """Nothing to fetch: the shards are on disk."""

    def sibling(self) -> EntryFiles:
        """A source of the same entry for another reader (its own index)."""
        return EntryFiles(self.entry)

    def close(self) -> None:
        """Nothing runs."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a handle: the entry's path and key."""
        return _reopen_entry, (str(self.entry.path), self.entry.key)


def _reopen_entry(path: str, key: str) -> EntryFiles:
    """Open the built entry at ``path`` again (unpickling), checking it is still entry ``key``."""
    entry = read_entry(Path(path))
    if entry is None or entry.key != key:
        raise MissingEntryFileError(errno.ENOENT, f"the built dataset {key[:12]} is no longer at {path}: was it "
                                    "removed from the cache? Build it again, or unpickle where that data dir is "
                                    "mounted", path)
    return EntryFiles(entry)


def lost_shards(entry: Entry, size: int) -> str | None:
    """Say which shards of the built ``entry`` an ``arrays.pklz`` of only ``size`` bytes lost and which it still
    serves ("Lost: shard 2 of 3 (examples 20 to 29); intact: shards 0 to 1 of 3 (examples 0 to 19)").

    None when it is not shorter than its manifest records (nothing is lost to a truncation).
    """
    if size >= entry.manifest["files"][ARRAYS_FILE]["size"]:
        return None
    index = ShardIndex.of_entry(entry, str(entry.path / ARRAYS_FILE))
    first = index.first_lost(size)
    intact = index.describe(0, first - 1) if first else "none"
    return f"Lost: {index.describe(first, len(index) - 1)}; intact: {intact}"
