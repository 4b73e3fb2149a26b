"""Reading one shard of a built dataset: its run of gzip members decoded whole, or placed block by block.

A shard's run of members holds its arrays as ``.npy`` files (`glyphforge.cache.npy_members`),
each array's rows in blocks of a member each: `place_shard` inflates them a block of rows
at a time into buffers a `Scratch` keeps, handing each block to its caller (given the rows
it needs, only the blocks holding them: `glyphforge.builds.reading.blocks`; a small array
read again, inflated whole and kept), and `decode_shard` inflates them into fresh arrays.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from io import FileIO
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge.cache.declared import layout_dtype
from glyphforge.cache.npy_members import ArraysMember, ArraySpec
from glyphforge.cache.pklz import GZIP_ERRORS, damaged_member, open_gzip_member

Shard = dict[str, np.ndarray]
#: Takes a block of rows of one array: ``put(name, first_row, block)``; the block is reused once it returns.
Put = Callable[[str, int, np.ndarray], None]


@dataclass(frozen=True)
class Member:
    """Where one shard's run of gzip members is and what it must hold.

    Attributes
    ----------
    path, offset, length
        The file, the run's first byte there, and its length.
    layout
        Each array's ``{"dtype": descr, "shape": per-row shape}`` (the entry's ``meta["layout"]``).
    rows
        The rows the shard holds.
    what
        How errors name it, e.g. ``"shard 12"``.
    blocks, block_rows
        Where its blocks are in the run (`glyphforge.builds.reading.blocks.BlockTable.shard`: for each
        array in sorted order, its first block's start, then each block's end), and the rows of each
        block.
    """

    path: Path
    offset: int
    length: int
    layout: Mapping[str, Any]
    rows: int
    what: str
    blocks: np.ndarray = field(compare=False)
    block_rows: int

    @property
    def source(self) -> str:
        return f"{self.path}: {self.what} (bytes {self.offset} to {self.offset + self.length})"

    def specs(self) -> dict[str, ArraySpec]:
        """What each array must be: the layout's dtype and per-row shape, ``rows`` rows."""
        return {name: ArraySpec(layout_dtype(info["dtype"]), (self.rows, *info["shape"]))
                for name, info in self.layout.items()}


#: An array whose rows of a whole shard take at most these bytes (labels, boxes: not images) is inflated whole, all its
#: blocks in one call, when a read needs all of them or a read of the shard needs rows of it again, and kept
#: (`Scratch.whole`): the reads of the shard's other blocks take their rows from there.
WHOLE_ARRAY_BYTES = 64 << 10
#: The most bytes of such arrays a `Scratch` keeps (those of the shards read least recently go first).
KEPT_BYTES = 8 << 20
#: The small arrays read once a `Scratch` remembers (a resumed stream reads most of its shards once: their blocks).
SEEN = 4096


@dataclass
class Scratch:
    """Memory a reader of many shards reuses: a buffer of a member's bytes, a block of rows of each array, and the
    small arrays of the shards read last (`WHOLE_ARRAY_BYTES`)."""

    raw: bytearray = field(default_factory=bytearray)
    blocks: dict[str, np.ndarray] = field(default_factory=dict)
    kept: OrderedDict[tuple[str, int, str], np.ndarray] = field(default_factory=OrderedDict)
    """Small arrays inflated whole, by file, first byte of their shard's run and name: `KEPT_BYTES` at most in all."""
    kept_bytes: int = 0
    seen: OrderedDict[tuple[str, int, str], None] = field(default_factory=OrderedDict)
    """The small arrays read once, a few of their blocks (`SEEN` at most): the next read inflates them whole."""

    def member_bytes(self, member: Member, first: int = 0, stop: int | None = None,
                     file: FileIO | None = None) -> memoryview:
        """Read ``member``'s bytes (those from its byte ``first`` to ``stop``: None, its end) into the reused buffer
        (grown as needed) and return a view of them; ``file``: ``member.path`` opened unbuffered (None: opened here)."""
        if file is None:
            with open(member.path, "rb", buffering=0) as opened:
                return self.member_bytes(member, first, stop, opened)
        length = (member.length if stop is None else stop) - first
        if len(self.raw) < length:
            self.raw = bytearray(length + length // 4)
        view, at = memoryview(self.raw)[:length], member.offset + first
        count = os.preadv(file.fileno(), [view], at)  # one system call, no seek
        while count < length and (more := os.preadv(file.fileno(), [view[count:]], at + count)):
            count += more
        if count != length:
            raise damaged_member(member.source, f"the file ends {length - count} bytes early")
        return view

    def whole(self, member: Member, name: str, spec: ArraySpec, bounds: np.ndarray, file: FileIO,
              every: bool) -> np.ndarray | None:
        """Small array ``name`` of ``member`` (its blocks at ``bounds``): as kept, or inflated whole, checked and kept;
        None when a read needing only some of its blocks (not ``every``) is the first (read those)."""
        key = (str(member.path), member.offset, name)
        if (array := self.kept.get(key)) is not None:
            self.kept.move_to_end(key)
            return array
        if not every and key not in self.seen:
            self.seen[key] = None
            if len(self.seen) > SEEN:
                self.seen.popitem(last=False)
            return None
        self.seen.pop(key, None)
        array = np.empty(spec.shape, spec.dtype)
        _inflate(self.member_bytes(member, int(bounds[0]), int(bounds[-1]), file), array,
                 partial(_rows_source, member, name, 0, member.rows))
        self.kept[key], self.kept_bytes = array, self.kept_bytes + array.nbytes
        while self.kept_bytes > KEPT_BYTES:
            self.kept_bytes -= self.kept.popitem(last=False)[1].nbytes
        return array

    def block(self, name: str, spec: ArraySpec, rows: int) -> np.ndarray:
        """A buffer of ``rows`` rows of array ``name`` (made once, or again when too small or of another kind)."""
        buffer = self.blocks.get(name)
        if buffer is None or buffer.dtype != spec.dtype or buffer.shape[1:] != spec.shape[1:] or len(buffer) < rows:
            buffer = self.blocks[name] = np.empty((rows, *spec.shape[1:]), spec.dtype)
        return buffer


def decode_shard(member: Member) -> Shard:
    """Decode ``member`` whole, into fresh arrays, checked against its layout and rows.

    Raises
    ------
    DamagedPklzError
        It is truncated or damaged, or holds other arrays than its layout and rows say.
    """
    with ArraysMember(Scratch().member_bytes(member), member.specs(), member.source) as arrays:
        return arrays.read_all()


def place_shard(member: Member, put: Put, scratch: Scratch, rows: tuple[int, int] | None = None) -> None:
    """Hand ``put`` the blocks of ``member``'s arrays holding ``rows`` (``(first, stop)``, clipped to the shard; None:
    all of them), each array's in order, in ``scratch``'s buffers.

    Each array's blocks are read in one piece from the file and each block is inflated alone
    into ``scratch``'s buffer of the array, its end checked (its CRC-32 and size) before it is
    handed over. A small array (`WHOLE_ARRAY_BYTES`) read whole or again is handed over at once,
    its rows from the array inflated whole (`Scratch.whole`). A block is valid until ``put``
    returns; a damaged one raises when it is reached, blocks handed over already: a caller drops
    what it placed.

    Raises
    ------
    DamagedPklzError
        A block does not inflate to its rows' bytes, naming the shard, the array and the block's rows.
    """
    step = member.block_rows
    first, stop = (0, member.rows) if rows is None else (max(0, rows[0]), min(member.rows, rows[1]))
    if first >= stop:
        return
    needed = range(first // step, (stop - 1) // step + 1)
    every = len(needed) == -(-member.rows // step)
    with open(member.path, "rb", buffering=0) as file:  # once for every array
        for (name, spec), bounds in zip(sorted(member.specs().items()), member.blocks, strict=True):
            small = spec.row_nbytes * member.rows <= WHOLE_ARRAY_BYTES
            if small and (whole := scratch.whole(member, name, spec, bounds, file, every)) is not None:
                put(name, first, whole[first:stop])
                continue
            raw = scratch.member_bytes(member, int(bounds[needed.start]), int(bounds[needed.stop]), file)
            base = int(bounds[needed.start])
            for block in needed:
                start, end = int(bounds[block]) - base, int(bounds[block + 1]) - base
                count = min(step, member.rows - block * step)
                buffer = scratch.block(name, spec, min(step, member.rows))[:count]
                _inflate(raw[start:end], buffer, partial(_rows_source, member, name, block * step, count))
                put(name, block * step, buffer)


def _inflate(raw: memoryview, buffer: np.ndarray, source: Callable[[], str]) -> None:
    """Inflate the gzip members ``raw`` (one block, or a run of them) into ``buffer``, which they must fill exactly
    (each member's trailer checked at its end); a `DamagedPklzError` naming ``source()`` otherwise."""
    view = buffer.data.cast("B")
    try:
        with open_gzip_member(raw) as stream:
            while view:
                count = stream.readinto(view)
                if not count:
                    raise damaged_member(source(), f"it holds {buffer.nbytes - len(view):,} bytes of "
                                         f"{buffer.nbytes:,}")
                view = view[count:]
            if stream.read(1):
                raise damaged_member(source(), f"it holds more than its {buffer.nbytes:,} bytes")
    except GZIP_ERRORS as error:
        raise damaged_member(source(), f"it does not inflate ({error})") from error


def _rows_source(member: Member, name: str, first: int, count: int) -> str:
    """How errors name a block (or an array's blocks): the shard's source, the array and the rows."""
    blocks = "block" if count <= member.block_rows else "blocks"
    return f"{member.source}, array {name!r}, the {blocks} of rows {first} to {first + count - 1}"
