"""Reading one shard of a built dataset: its gzip member decoded whole, or placed block by block.

A shard's member holds its arrays as ``.npy`` files (`glyphforge.cache.npy_members`):
`place_shard` inflates them a block of rows at a time into buffers a `Scratch` keeps,
handing each block to its caller, and `decode_shard` inflates them into fresh arrays.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge.cache.declared import layout_dtype
from glyphforge.cache.npy_members import ArraysMember, ArraySpec
from glyphforge.cache.pklz import damaged_member

#: About the bytes of one block `place_shard` inflates at a time: small enough to stay in a core's cache.
BLOCK_BYTES = 1 << 19

Shard = dict[str, np.ndarray]
#: Takes a block of rows of one array: ``put(name, first_row, block)``; the block is reused once it returns.
Put = Callable[[str, int, np.ndarray], None]


@dataclass(frozen=True)
class Member:
    """Where one shard's gzip member is and what it must hold.

    Attributes
    ----------
    path, offset, length
        The file, the member's first byte there, and its length.
    layout
        Each array's ``{"dtype": descr, "shape": per-row shape}`` (the entry's ``meta["layout"]``).
    rows
        The rows the shard holds.
    what
        How errors name it, e.g. ``"shard 12"``.
    """

    path: Path
    offset: int
    length: int
    layout: Mapping[str, Any]
    rows: int
    what: str

    @property
    def source(self) -> str:
        return f"{self.path}: {self.what} (bytes {self.offset} to {self.offset + self.length})"

    def specs(self) -> dict[str, ArraySpec]:
        """What each array must be: the layout's dtype and per-row shape, ``rows`` rows."""
        return {name: ArraySpec(layout_dtype(info["dtype"]), (self.rows, *info["shape"]))
                for name, info in self.layout.items()}


@dataclass
class Scratch:
    """Memory a reader of many shards reuses: a buffer of a member's bytes, and a block of rows of each array."""

    raw: bytearray = field(default_factory=bytearray)
    blocks: dict[str, np.ndarray] = field(default_factory=dict)

    def member_bytes(self, member: Member) -> memoryview:
        """Read ``member``'s bytes into the reused buffer (grown as needed) and return a view of them."""
        if len(self.raw) < member.length:
            self.raw = bytearray(member.length + member.length // 4)
        view = memoryview(self.raw)[:member.length]
        with open(member.path, "rb", buffering=0) as stream:
            stream.seek(member.offset)
            count = stream.readinto(view)
            while count < member.length and (more := stream.readinto(view[count:])):
                count += more
        if count != member.length:
            raise damaged_member(member.source, f"the file ends {member.length - count} bytes early")
        return view

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
    """Hand ``member``'s arrays to ``put`` a block of rows at a time (about `BLOCK_BYTES`), in ``scratch``'s buffers.

    ``rows`` (``(first, stop)``): at least those rows are handed over (here: all of them); None: all.

    Every array is handed over whole, in order; a block is valid until ``put`` returns.
    The member's end is checked after its last block (a damaged one raises there, its
    blocks handed over already: a caller drops what it placed).

    Raises
    ------
    DamagedPklzError
        As `decode_shard`.
    """
    with ArraysMember(scratch.member_bytes(member), member.specs(), member.source) as arrays:
        for name, spec in arrays.arrays():
            step = max(1, BLOCK_BYTES // max(spec.row_nbytes, 1))
            buffer = scratch.block(name, spec, min(step, member.rows))
            for first in range(0, member.rows, step):
                block = buffer[:min(step, member.rows - first)]
                arrays.read_into(block)
                put(name, first, block)
        arrays.finish()

