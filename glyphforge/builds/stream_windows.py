"""The memory a `~glyphforge.builds.stream.ShardStream` decodes windows into, and reuses.

A window is decoded shard by shard, each shard a block of rows at a time (`Placer` puts the
block's rows where the window's shuffle puts them), into the arrays of a done window when no
batch a consumer still holds is a view of them (`Spare`), else into new ones. Batches that
are copies are reused the same way (`Windows.batch`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from glyphforge.builds.members import Scratch

__all__ = ["SPARE", "Placer", "Spare", "Window", "Windows", "copy_rows"]

#: Sets of a done window's arrays kept to decode later windows into (`Windows`).
SPARE = 2


@dataclass
class Window:
    """One decoded window: its rows in the epoch's order, from position ``begin`` of the epoch."""

    begin: int
    arrays: dict[str, np.ndarray]
    """Views of the first rows of ``owners``."""
    owners: dict[str, np.ndarray]
    """The arrays it was decoded into (reused once it is done: `Windows`)."""


@dataclass
class Spare:
    """Sets of arrays done with, kept to be written again once no batch a consumer holds is a view of them.

    Writing into arrays used before spares the fresh pages a new array faults in. Of more
    than ``keep`` sets the oldest is left to its batches.
    """

    keep: int
    sets: list[dict[str, np.ndarray]] = field(default_factory=list)

    def give(self, arrays: dict[str, np.ndarray]) -> None:
        """Keep ``arrays`` to be written again once nothing views them."""
        self.sets.append(arrays)
        del self.sets[:-self.keep]

    def take(self, rows: int) -> dict[str, np.ndarray]:
        """A kept set of ``rows`` rows or more that no batch views any more, by name (empty: none)."""
        for at, arrays in enumerate(self.sets):
            if min(map(len, arrays.values())) >= rows and max(_references(arrays)) == _ALONE:
                return self.sets.pop(at)
        return {}


@dataclass
class Windows:
    """An iteration's decoded windows (those the batch under way reads), and the memory it reuses.

    The arrays of done windows (`SPARE` sets) and of batches that are copies, each reused
    once no batch views them (`Spare`), and the scratch shards are inflated into.
    """

    decoded: dict[int, Window] = field(default_factory=dict)
    spare: Spare = field(default_factory=lambda: Spare(SPARE))
    copies: Spare = field(default_factory=lambda: Spare(SPARE + 1))
    scratch: Scratch = field(default_factory=Scratch)
    """The buffers shards are inflated into, a block of rows at a time, before their rows are placed."""

    def done_before(self, number: int) -> None:
        """Let the windows before ``number`` go (the batches go forward): their arrays become spare."""
        for done in [done for done in self.decoded if done < number]:
            self.spare.give(self.decoded.pop(done).owners)

    def batch(self, like: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Arrays of ``rows`` rows shaped as ``like``'s for a batch that is a copy (kept ones nothing views, or new)."""
        owners = self.copies.take(rows)
        for name, array in like.items():
            if name not in owners:
                owners[name] = np.empty((rows, *array.shape[1:]), array.dtype)
        self.copies.give(owners)
        return {name: owners[name][:rows] for name in like}


def _references(arrays: dict[str, np.ndarray]) -> list[int]:
    """``sys.getrefcount`` of each array of ``arrays``: a view of one (a batch, or a part of it) adds 1."""
    return [sys.getrefcount(array) for array in arrays.values()]


#: What `_references` counts for an array nothing but its dict refers to (counted here, not assumed).
_ALONE = _references({"alone": np.empty(0)})[0]


@dataclass(frozen=True)
class Placer:
    """Puts the blocks of one shard's arrays where the shard's rows go in a window's ``arrays`` (`read_blocks`'s put).

    ``places`` is each row's place among the window's rows to come (negative: consumed, left
    out when ``partial``), or, for a window in shard order, the first row's place (an int).
    Arrays missing from ``arrays`` are made of ``size`` rows.
    """

    arrays: dict[str, np.ndarray]
    places: np.ndarray | int
    partial: bool
    size: int

    def __call__(self, name: str, first: int, block: np.ndarray) -> None:
        if name not in self.arrays:  # every shard has the same dtypes and shapes (the builder checks)
            self.arrays[name] = np.empty((self.size, *block.shape[1:]), block.dtype)
        out = self.arrays[name]
        if isinstance(self.places, int):
            start = self.places + first
            low = min(max(-start, 0), len(block))
            out[start + low:start + len(block)] = block[low:]
            return
        places = self.places[first:first + len(block)]
        if self.partial:
            kept = np.flatnonzero(places >= 0)
            out[places[kept]] = block[kept]
        else:
            out[places] = block


def copy_rows(out: dict[str, np.ndarray], window: Window, positions: np.ndarray, mask: np.ndarray) -> None:
    """Copy the rows of ``window`` at ``positions[mask]`` to ``out[name][mask]``."""
    for name, array in window.arrays.items():
        out[name][mask] = array[positions[mask] - window.begin]
