"""`ShardStream`: shuffled batches of a built dataset for training, a few decoded shards in memory.

``ds.stream(batch_size, shuffle=True, seed=0, epochs=1, drop_last=False, rank=0,
world_size=1, worker=0, num_workers=1, even_ranks="repeat", window=4)`` plans each
epoch from the shard index alone (no data is read to plan):

1. **Shard order.** The epoch's shards are permuted by ``default_rng([seed, epoch])``
   (every rank computes the same order), or kept in order without ``shuffle``.
2. **Ranks.** The epoch is that order's rows, end to end; rank ``r`` takes the
   contiguous part ``[r N / R, (r + 1) N / R)`` (``N`` rows, ``R = world_size``), so
   each rank reads whole shards except at most one shared at each end. Counts
   differ by at most one row; with ``even_ranks="repeat"`` (default) a short rank
   repeats the row after its part (the next rank's first), so every rank has
   ``ceil(N / R)`` rows; with ``"drop"`` a long rank drops its last row (``N // R``
   each). Every rank therefore yields the same number of batches: data-parallel
   training never waits on a rank that ran out.
3. **Shuffling.** A rank's rows are cut into windows of ``window`` consecutive shard
   pieces (default 4 shards); rows are permuted within each window by
   ``default_rng([seed, epoch, rank, window number])``. Memory: about twice a window
   of decoded shards, whatever the dataset's size.
4. **Batches and workers.** The rank's rows are cut into batches of ``batch_size``
   (the last one short, or dropped with ``drop_last``) by `glyphforge.batching.rebatch`,
   the batcher `glyphforge.batches` uses too; worker ``w`` of ``W`` yields the
   contiguous run of batches ``[w B / W, (w + 1) B / W)`` of its rank's ``B`` batches,
   so the batches of a rank are the same for any number of workers.

Within a ``torch.utils.data.DataLoader`` worker the stream reads
``torch.utils.data.get_worker_info()`` itself (only when torch is already imported:
glyphforge never imports it), so ``DataLoader(ds.stream(256), batch_size=None,
num_workers=4)`` splits the work among the loader's workers, and ``len(stream)``
(the rank's batches per epoch times ``epochs``) is what the loader yields.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from glyphforge._checks import check_int
from glyphforge.batching import join_rows, rebatch
from glyphforge.builds.index import ShardIndex

if TYPE_CHECKING:
    from glyphforge.builds.dataset import BuiltDataset

EVEN_RANKS = ("repeat", "drop")
DEFAULT_WINDOW = 4

Batch = tuple[np.ndarray, dict[str, np.ndarray] | None]


@dataclass(frozen=True)
class Pieces:
    """Runs of rows of shards, in reading order: shard ``shard[i]``'s rows ``[start[i], stop[i])``."""

    shard: np.ndarray
    start: np.ndarray
    stop: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        return self.stop - self.start

    def __len__(self) -> int:
        return len(self.shard)

    def cut(self, low: int, high: int) -> Pieces:
        """The rows at positions ``[low, high)`` of these pieces' rows taken end to end."""
        if high <= low:
            return Pieces(*(np.zeros(0, np.int64) for _ in range(3)))
        ends = np.cumsum(self.sizes)
        first, last = int(np.searchsorted(ends, low, side="right")), int(np.searchsorted(ends, high, side="left"))
        shard, start, stop = (column[first:last + 1].copy() for column in (self.shard, self.start, self.stop))
        begins = ends[first:last + 1] - self.sizes[first:last + 1]
        start[0] += low - begins[0]
        stop[-1] -= ends[last] - high
        return Pieces(shard, start, stop)

    def then(self, other: Pieces) -> Pieces:
        """These pieces followed by ``other``."""
        return Pieces(*(np.concatenate([a, b]) for a, b in zip(
            (self.shard, self.start, self.stop), (other.shard, other.start, other.stop), strict=True)))


@dataclass(frozen=True)
class RankPlan:
    """One rank's rows of one epoch (after evening out) and how they are cut into windows."""

    pieces: Pieces
    windows: np.ndarray
    """Window ``j`` is ``pieces[windows[j]:windows[j + 1]]``."""

    @property
    def n_rows(self) -> int:
        return int(self.pieces.sizes.sum())


@dataclass(frozen=True)
class ShardStream:
    """A re-iterable stream of ``(images, targets)`` batches (see the module docstring).

    Create it with ``BuiltDataset.stream``; ``len(stream)`` is the number of batches one
    iteration yields (for this rank, and this worker when ``num_workers > 1``).
    ``set_epoch(e)`` makes the next iteration start at epoch ``e`` (for a loop that
    iterates once per epoch).
    """

    dataset: BuiltDataset
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    epochs: int = 1
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    even_ranks: str = "repeat"
    window: int = DEFAULT_WINDOW
    first_epoch: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, 1)
        check_int("seed", self.seed, 0)
        check_int("epochs", self.epochs, 1)
        check_int("world_size", self.world_size, 1)
        check_int("rank", self.rank, 0, self.world_size - 1)
        check_int("num_workers", self.num_workers, 1)
        check_int("worker", self.worker, 0, self.num_workers - 1)
        check_int("window", self.window, 1)
        if self.even_ranks not in EVEN_RANKS:
            raise ValueError(f"even_ranks must be one of {', '.join(EVEN_RANKS)}, got {self.even_ranks!r}")
        if self.even_ranks == "drop" and len(self.dataset) < self.world_size:
            raise ValueError(f"even_ranks='drop' leaves no row for each of {self.world_size} ranks: the dataset "
                             f"has {len(self.dataset)}; use even_ranks='repeat' or fewer ranks")

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at epoch ``epoch`` (its shuffle), like ``DistributedSampler.set_epoch``."""
        object.__setattr__(self, "first_epoch", check_int("epoch", epoch, 0))

    # -- sizes --------------------------------------------------------------------
    @property
    def rows_per_rank(self) -> int:
        """Rows each rank yields per epoch (the same for every rank)."""
        n = len(self.dataset)
        return -(-n // self.world_size) if self.even_ranks == "repeat" else n // self.world_size

    @property
    def batches_per_rank(self) -> int:
        """Batches each rank yields per epoch."""
        rows = self.rows_per_rank
        return rows // self.batch_size if self.drop_last else -(-rows // self.batch_size)

    def _worker_batches(self, worker: int, num_workers: int) -> tuple[int, int]:
        total = self.batches_per_rank
        return worker * total // num_workers, (worker + 1) * total // num_workers

    def __len__(self) -> int:
        first, last = self._worker_batches(self.worker, self.num_workers)
        return (last - first) * self.epochs

    # -- planning -------------------------------------------------------------------
    def plan(self, epoch: int) -> RankPlan:
        """Return this rank's rows of ``epoch`` and their windows (reads no data)."""
        index: ShardIndex = self.dataset.index
        n = index.n_examples
        order = np.random.default_rng([self.seed, epoch]).permutation(len(index)) if self.shuffle \
            else np.arange(len(index))
        epoch_pieces = Pieces(order.astype(np.int64), np.zeros(len(order), np.int64), index.rows[order])
        low, high = self.rank * n // self.world_size, (self.rank + 1) * n // self.world_size
        wanted = self.rows_per_rank
        mine = epoch_pieces.cut(low, min(high, low + wanted))  # "drop": a long rank loses its last row
        for extra in range(wanted - (high - low)):  # "repeat": a short rank repeats the rows after its part
            position = (high + extra) % n
            mine = mine.then(epoch_pieces.cut(position, position + 1))
        windows = np.append(np.arange(0, len(mine), self.window), len(mine)).astype(np.int64)
        return RankPlan(mine, windows)

    # -- reading ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[Batch]:
        worker, num_workers = self.worker, self.num_workers
        info = _torch_worker_info()
        if info is not None:  # inside a DataLoader worker: split this stream among the loader's workers too
            worker, num_workers = worker * info.num_workers + info.id, num_workers * info.num_workers
        first, last = self._worker_batches(worker, num_workers)
        reader = self.dataset.reopened(cache_shards=0)  # each shard is read once: keep none
        image_name = reader.image_name
        for epoch in range(self.first_epoch, self.first_epoch + self.epochs):
            plan = self.plan(epoch)
            low = first * self.batch_size
            high = min(last * self.batch_size, plan.n_rows)
            for arrays in rebatch(self._rows(reader, plan, epoch, low, high), self.batch_size, self.drop_last):
                images = arrays.pop(image_name)
                yield images, arrays or None

    def _rows(
        self, reader: BuiltDataset, plan: RankPlan, epoch: int, low: int, high: int
    ) -> Iterator[dict[str, np.ndarray]]:
        """Yield chunks of rows at positions ``[low, high)`` of ``plan`` (each window shuffled whole)."""
        pieces = plan.pieces
        ends = np.cumsum(pieces.sizes)
        for number in range(len(plan.windows) - 1):
            first, last = int(plan.windows[number]), int(plan.windows[number + 1])
            begin = int(ends[first - 1]) if first else 0
            end = int(ends[last - 1])
            if end <= low or begin >= high:
                continue
            window = join_rows([
                {name: array[int(pieces.start[i]):int(pieces.stop[i])] for name, array in
                 reader.shard(int(pieces.shard[i])).items()}
                for i in range(first, last)
            ])  # the decoded shards are freed here: only the window's rows stay
            keep = slice(max(low, begin) - begin, min(high, end) - begin)
            if self.shuffle:
                order = np.random.default_rng([self.seed, epoch, self.rank, number]).permutation(end - begin)[keep]
                chunk = {name: array[order] for name, array in window.items()}
            else:
                chunk = {name: array[keep] for name, array in window.items()}
            del window
            yield chunk

    def __repr__(self) -> str:
        return (f"<ShardStream of {self.dataset!r}: batch_size {self.batch_size}, rank {self.rank}/{self.world_size}, "
                f"worker {self.worker}/{self.num_workers}, {len(self)} batches>")


def _torch_worker_info() -> Any:
    """``torch.utils.data.get_worker_info()`` when torch is already imported, else None (never imports it)."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.utils.data.get_worker_info()


def open_stream(dataset: BuiltDataset, batch_size: int, **options: Any) -> ShardStream:
    """Return ``ShardStream(dataset, batch_size, **options)``; a torch ``IterableDataset`` where torch is imported."""
    stream_class = __getattr__("TorchShardStream") if "torch" in sys.modules else ShardStream
    stream: ShardStream = stream_class(dataset, batch_size, **options)
    return stream


def __getattr__(name: str) -> Any:
    """``TorchShardStream``: `ShardStream` as a ``torch.utils.data.IterableDataset``, made on first use.

    Made only where torch is imported already (``open_stream``) or when a DataLoader
    worker unpickles one (where torch is imported by the loader).
    """
    if name != "TorchShardStream":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import torch.utils.data

    torch_class = type("TorchShardStream", (ShardStream, torch.utils.data.IterableDataset), {
        "__module__": __name__, "__doc__": "A `ShardStream` that is a ``torch.utils.data.IterableDataset``.",
    })
    globals()[name] = torch_class
    return torch_class
