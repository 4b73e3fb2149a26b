"""A ``DataLoader`` worker's batches in blocks of memory it reuses once the training loop lets them go.

Sending a batch in fresh shared memory costs, each batch, making the memory, faulting its
pages in the worker, and a connection from the loop to the worker to receive its file
descriptor. Here each worker keeps a pool of `Block` s instead: anonymous memory files
(``memfd_create``: no name, so their memory goes with the last descriptor or map of them),
each with a header of `HEADER` bytes before the arrays.

The protocol:

1. **Gather.** The stream gathers a batch into a block whose *held* byte is 0 (one large
   enough; else a new block, up to `POOL` blocks; past that, fresh torch shared memory as
   `~glyphforge.builds.stream.workers.SharedBatches` makes it) and sets the byte to 1.
2. **Send.** It yields a `WorkerBatch`, which pickles as the block's key (worker pid, pool,
   block), each array's place (offset, dtype, shape), its arrays of strings by value, and, the
   first time only that block is sent, a duplicate of its descriptor
   (``multiprocessing.reduction.DupFd``: the resource sharer torch's own tensors go through).
3. **Receive.** Unpickling in the loop (`received`) maps a block once (kept in `MAPS` by its
   key) and returns ``[images, targets]`` (as torch's ``default_convert`` makes a tuple) of
   tensors viewing the map, all through one numpy array made for this batch alone.
4. **Release.** A ``weakref.finalize`` on that array sets the held byte back to 0 when it goes:
   when every tensor of the batch, and every view of one the loop kept, is gone (pinning
   copies the batch, so then at once). Only then may the worker gather into the block again:
   it never waits for a block and never writes into a held one.

A pool lives as long as the worker's copy of the stream: the iterations of a persistent
worker (its next epochs) gather into the blocks of its first, no memory file made, sent or
faulted in again. When it goes, the worker sets the *retired* byte of each block (its
descriptor and map in the worker go with the block's last batch to send: a worker's queue
pickles its batches later, in a thread of its own). The loop drops its
maps of retired blocks no batch holds, and of blocks of workers that are gone, each time it
maps a new block, and its maps of a worker's blocks when the worker's process object goes
(its loader is dropped, broken out of or done: `_watch`). A map a tensor still uses lives on
in it. A worker that takes a batch apart
before it is sent (a ``collate_fn`` of its own) gets tensors in fresh torch shared memory, and
the block is free again at once. Linux only (``os.memfd_create``); elsewhere every batch is
fresh shared memory.

Only where torch is imported already (a ``DataLoader`` worker, and the loop that unpickles its
batches): glyphforge never imports it.
"""
from __future__ import annotations

import itertools
import math
import mmap
import multiprocessing
import os
import sys
import weakref
from multiprocessing.reduction import DupFd
from typing import Any

import numpy as np

from glyphforge.builds.stream.workers import SharedBatches, batch_layout

__all__ = ["HEADER", "MAPS", "POOL", "Block", "Blocks", "WorkerBatch", "received"]

#: Bytes before a block's arrays: byte 0 is 1 while the loop holds the block's batch, byte 1 once its pool is done.
HEADER = 64
HELD, RETIRED = 0, 1
#: Blocks a worker's iteration makes at most; past that, batches go in fresh shared memory.
POOL = 32
#: The loop's maps of workers' blocks, by key (worker pid, pool, block).
MAPS: dict[tuple[int, int, int], mmap.mmap] = {}
_POOLS = itertools.count()
#: The workers whose process objects `_watch` watches.
_WATCHED: set[int] = set()


class Block:
    """One anonymous memory file of a worker, mapped, and whether the loop was sent its descriptor."""

    def __init__(self, key: tuple[int, int, int], size: int) -> None:
        self.key, self.size, self.sent = key, size, False
        self.fd = os.memfd_create(f"glyphforge-batch-{key[2]}", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        weakref.finalize(self, os.close, self.fd)  # once no batch to send is in it (the queue pickles later)


class Blocks:
    """A worker's pool of blocks: makes each batch's arrays (`batch`) and what to yield of them (`out`)."""

    def __init__(self) -> None:
        self.pool = next(_POOLS)
        self.blocks: list[Block] = []
        self.fresh = SharedBatches()
        self._made: tuple[Block, dict[str, np.ndarray], dict[str, int]] | None = None
        weakref.finalize(self, _retire, self.blocks)

    def batch(self, like: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Arrays of ``rows`` rows shaped as ``like``'s, in a free block (held from now on) or fresh shared memory.

        Arrays of strings are numpy arrays of their own (torch leaves them as they are).
        """
        shapes, offsets, end = batch_layout(like, rows, HEADER)
        block = self._free(end) if hasattr(os, "memfd_create") else None
        if block is None:
            self._made = None
            return self.fresh.batch(like, rows)
        block.map[HELD] = 1
        arrays = {name: np.empty(shapes[name], array.dtype) if name not in offsets else
                  np.frombuffer(block.map, array.dtype, math.prod(shapes[name]), offsets[name]).reshape(
                      shapes[name]) for name, array in like.items()}
        self._made = (block, arrays, offsets)
        return arrays

    def _free(self, size: int) -> Block | None:
        """A block of ``size`` bytes or more the loop holds no batch of (a new one if none; None: the pool is full)."""
        for block in self.blocks:
            if block.size >= size and not block.map[HELD]:
                return block
        if len(self.blocks) == POOL:
            return None
        self.blocks.append(Block((os.getpid(), self.pool, len(self.blocks)), size))
        return self.blocks[-1]

    def out(self, arrays: dict[str, np.ndarray], image_name: str) -> Any:
        """What the stream yields of ``arrays`` (the last `batch`, filled): a `WorkerBatch`, or fresh shared tensors."""
        if self._made is None:
            tensors = self.fresh.tensors(arrays)
            return tensors.pop(image_name), tensors or None
        block, made, offsets = self._made
        assert all(arrays[name] is made[name] for name in arrays), "a worker's batch is the last one made"
        self._made = None
        return WorkerBatch(block, arrays, offsets, image_name)


def _retire(blocks: list[Block]) -> None:
    """Mark a done pool's blocks retired: the loop's maps of them go once it lets their batches go."""
    for block in blocks:
        block.map[RETIRED] = 1


class WorkerBatch:
    """A batch in a block, as a worker yields it: pickles as the block's key and places (`received` unpickles it).

    Iterating it (a ``collate_fn`` taking the batch apart in the worker) gives ``(images,
    targets)`` as tensors in fresh shared memory, a copy, and frees the block.
    """

    def __init__(self, block: Block, arrays: dict[str, np.ndarray], offsets: dict[str, int], image_name: str) -> None:
        self.block, self.arrays, self.offsets, self.image_name = block, arrays, offsets, image_name
        self._apart: tuple[Any, Any] | None = None

    def __iter__(self) -> Any:
        if self._apart is None:
            fresh = SharedBatches()
            copies = fresh.batch(self.arrays, len(self.arrays[self.image_name]))
            for name, array in self.arrays.items():
                copies[name][:] = array
            self.block.map[HELD] = 0
            tensors = fresh.tensors(copies)
            self._apart = (tensors.pop(self.image_name), tensors or None)
        return iter(self._apart)

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> Any:
        return list(self)[index]

    def __reduce__(self) -> tuple[Any, ...]:
        if self._apart is not None:
            return list, (list(self._apart),)
        block = self.block
        fd = None if block.sent else DupFd(block.fd)
        block.sent = True
        places = {name: (offset, self.arrays[name].dtype.str, self.arrays[name].shape)
                  for name, offset in self.offsets.items()}
        strings = {name: array for name, array in self.arrays.items() if name not in places}
        return received, (block.key, block.size, fd, list(self.arrays), places, strings, self.image_name)


def received(
    key: tuple[int, int, int], size: int, fd: Any, names: list[str], places: dict[str, tuple[int, str, tuple]],
    strings: dict[str, np.ndarray], image_name: str,
) -> list[Any]:
    """A `WorkerBatch` unpickled in the loop: ``[images, targets or None]``, tensors viewing the worker's block."""
    torch = sys.modules["torch"]
    if fd is not None:
        _forget_done()
        _watch(key[0])
        try:
            descriptor = fd.detach()
        except (OSError, EOFError) as error:  # its resource sharer went with it: as torch says of a worker gone
            raise RuntimeError(f"DataLoader worker (pid {key[0]}) exited before its batch's memory reached this "
                               f"process ({type(error).__name__}: {error}); see the worker's own error above") from None
        try:
            MAPS[key] = mmap.mmap(descriptor, size)
        finally:
            os.close(descriptor)
    block_map = MAPS[key]
    whole = np.frombuffer(block_map, np.uint8)  # this batch's alone: the release signal when it goes
    weakref.finalize(whole, _release, block_map)
    arrays = {}
    for name in names:
        if name in strings:
            arrays[name] = strings[name]
            continue
        offset, dtype, shape = places[name]
        count = math.prod(shape) * np.dtype(dtype).itemsize
        arrays[name] = torch.from_numpy(whole[offset:offset + count].view(dtype).reshape(shape))
    images = arrays.pop(image_name)
    return [images, arrays or None]


def _release(block_map: mmap.mmap) -> None:
    """The loop let a block's batch go: the worker may gather into it again."""
    block_map[HELD] = 0


def _forget_done() -> None:
    """Drop the maps of blocks whose worker is gone, or whose pool is done and no batch holds (tensors keep theirs).

    A gone worker sends nothing more (a batch it sent that the loop never took, at a loader's
    shutdown, leaves its block held); a done pool's last batches may be on their way yet.
    """
    for key, block_map in list(MAPS.items()):
        if (block_map[RETIRED] and not block_map[HELD]) or not _alive(key[0]):
            MAPS.pop(key, None)


def _watch(pid: int) -> None:
    """Drop the maps of worker ``pid``'s blocks when its process object goes (with its loader), once set up."""
    if pid in _WATCHED:
        return
    for process in multiprocessing.active_children():  # a loader's workers are this process's children
        if process.pid == pid:
            _WATCHED.add(pid)
            weakref.finalize(process, _forget_worker, pid)
            return


def _forget_worker(pid: int) -> None:
    """Drop the maps of worker ``pid``'s blocks (its loader is gone; tensors keep the maps they use)."""
    _WATCHED.discard(pid)
    for key in list(MAPS):
        if key[0] == pid:
            MAPS.pop(key, None)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a worker not yet reaped counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
