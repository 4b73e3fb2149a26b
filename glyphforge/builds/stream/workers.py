"""A stream inside a torch ``DataLoader`` worker: each batch gathered straight into tensors in shared memory.

A worker's batch goes to the training loop through a queue, pickled: torch moves a tensor's
memory into shared memory then, copying it, unless it is there already (then only a handle
goes). So, in a worker, `SharedBatches` makes each batch's arrays as tensors in shared memory
(as torch's own ``default_collate`` does for the batches it assembles in a worker), the stream
gathers its rows into them (its one copy), and yields the tensors: torch's ``default_convert``
leaves them as they are and pickling copies nothing. A batch's tensors are views of one block
of shared memory: one block made and one file descriptor passed to the loop a batch (torch
passes one per storage, over a connection of its own), not one per array. Every batch is fresh memory (the loop may
hold it as long as it likes; the worker cannot know when it lets it go), never a view of a
window or a reused array. Outside a worker nothing of this runs.

Only where torch is imported already (a ``DataLoader`` worker): glyphforge never imports it.
"""
from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

__all__ = ["ALIGN", "TORCH_LEAVES", "SharedBatches", "batch_layout", "torch_worker_info"]

#: The dtype kinds of arrays torch's ``default_convert`` leaves as numpy (strings, objects): made as such.
TORCH_LEAVES = "SUO"
#: Bytes each array of a batch's block starts at a multiple of.
ALIGN = 64


def torch_worker_info() -> Any:
    """``torch.utils.data.get_worker_info()`` when torch is already imported, else None (never imports it)."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.utils.data.get_worker_info()


def batch_layout(
    like: dict[str, np.ndarray], rows: int, start: int = 0,
) -> tuple[dict[str, tuple[int, ...]], dict[str, int], int]:
    """Of a batch of ``rows`` rows shaped as ``like``'s: each array's shape, where each array torch makes a tensor
    of starts in one block of memory from byte ``start`` (a multiple of `ALIGN`), and where that block ends."""
    shapes = {name: (rows, *array.shape[1:]) for name, array in like.items()}
    offsets, end = {}, start
    for name, array in like.items():
        if array.dtype.kind not in TORCH_LEAVES:
            offsets[name] = -(-end // ALIGN) * ALIGN
            end = offsets[name] + math.prod(shapes[name]) * array.itemsize
    return shapes, offsets, end


class SharedBatches:
    """Makes a worker's batches in shared memory (`batch`) and gives back their tensors (`tensors`)."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[np.ndarray, Any]] = {}

    def batch(self, like: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Arrays of ``rows`` rows shaped as ``like``'s: the memory of new tensors, one block of shared memory for all.

        The `~glyphforge.builds.stream.windows.Windows.batch` of a stream in a worker. The
        tensors share one storage, so the batch is one block to make and one handle to send
        (a pickler sends an object once).
        """
        torch = sys.modules["torch"]
        shapes, offsets, end = batch_layout(like, rows)
        storage = torch.UntypedStorage._new_shared(end) if offsets else None
        self._made = {}
        for name, array in like.items():
            if name not in offsets:
                self._made[name] = (np.empty(shapes[name], array.dtype),) * 2
                continue
            tensor = torch.empty(0, dtype=torch.from_numpy(array[:0]).dtype)
            tensor.set_(storage, offsets[name] // array.itemsize, shapes[name])
            self._made[name] = (tensor.numpy(), tensor)
        return {name: made[0] for name, made in self._made.items()}

    def tensors(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """The tensors whose memory ``arrays`` (the last `batch`, filled) are (arrays of strings: as they are)."""
        assert all(arrays[name] is self._made[name][0] for name in arrays), "a worker's batch is the last one made"
        return {name: self._made[name][1] for name in arrays}
