"""A stream inside a torch ``DataLoader`` worker: each batch gathered straight into tensors in shared memory.

A worker's batch goes to the training loop through a queue, pickled: torch moves a tensor's
memory into shared memory then, copying it, unless it is there already (then only a handle
goes). So, in a worker, `SharedBatches` makes each batch's arrays as tensors in shared memory
(as torch's own ``default_collate`` does for the batches it assembles in a worker), the stream
gathers its rows into them (its one copy), and yields the tensors: torch's ``default_convert``
leaves them as they are and pickling copies nothing. Every batch is fresh memory (the loop may
hold it as long as it likes; the worker cannot know when it lets it go), never a view of a
window or a reused array. Outside a worker nothing of this runs.

Only where torch is imported already (a ``DataLoader`` worker): glyphforge never imports it.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["TORCH_LEAVES", "SharedBatches", "torch_worker_info"]

#: The dtype kinds of arrays torch's ``default_convert`` leaves as numpy (strings, objects): made as such.
TORCH_LEAVES = "SUO"


def torch_worker_info() -> Any:
    """``torch.utils.data.get_worker_info()`` when torch is already imported, else None (never imports it)."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.utils.data.get_worker_info()


class SharedBatches:
    """Makes a worker's batches in shared memory (`batch`) and gives back their tensors (`tensors`)."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[np.ndarray, Any]] = {}

    def batch(self, like: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Arrays of ``rows`` rows shaped as ``like``'s, each the memory of a new tensor in shared memory.

        The `~glyphforge.builds.stream_windows.Windows.batch` of a stream in a worker.
        """
        torch = sys.modules["torch"]
        self._made = {}
        for name, array in like.items():
            shape = (rows, *array.shape[1:])
            if array.dtype.kind in TORCH_LEAVES:
                self._made[name] = (np.empty(shape, array.dtype),) * 2
                continue
            storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * array.itemsize)
            tensor = torch.empty(0, dtype=torch.from_numpy(array[:0]).dtype).set_(storage, 0, shape)
            self._made[name] = (tensor.numpy(), tensor)
        return {name: made[0] for name, made in self._made.items()}

    def tensors(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """The tensors whose memory ``arrays`` (the last `batch`, filled) are (arrays of strings: as they are)."""
        assert all(arrays[name] is self._made[name][0] for name in arrays), "a worker's batch is the last one made"
        return {name: self._made[name][1] for name in arrays}
