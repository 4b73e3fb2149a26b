"""`ShardStream`: shuffled batches of a built dataset for training, resumable, divided among ranks and workers.

``ds.stream(batch_size, shuffle=True, seed=0, epochs=1, drop_last=False, rank=0,
world_size=1, worker=0, num_workers=1, even_ranks="repeat", window=1, partitions=None, turns=None,
resume=None)`` plans each epoch from the shard index alone (no data is read to plan). Each numeric
option has a bound (`glyphforge.builds.stream.state.LIMITS`), and so has each field of a state.
``batch_size`` is a rank's batch; the **global batch** is ``G = batch_size * world_size`` rows.

1. **The epoch's global order** depends on ``(seed, shuffle, window, partitions, turns)``,
   the epoch, the rows of a shard's block (`glyphforge.cache.declared.block_rows`) and ``G``,
   never on the number of ranks or workers (`glyphforge.builds.stream.plan`): the permuted
   shards are cut into ``partitions * turns`` parts, each part's rows into pieces at its
   shards' block boundaries, permuted; global batch ``j`` takes about ``G / partitions`` rows
   from each of the ``partitions`` lanes of turn ``j mod turns``, each part's rows shuffled a
   window of ``window`` pieces (at most ``window`` blocks' rows) at a time. ``partitions`` and
   ``turns`` are 16 and 2 by default, 1 and 1 without ``shuffle`` (the dataset's own order).
2. **Global batches** are that order cut into ``G`` rows from the epoch's start (or from
   where a resumed stream starts, below); the last one holds the ``g = N mod G`` rows left
   (dropped with ``drop_last``).
3. **Ranks.** Rank ``r`` takes the positions ``[r * batch_size, (r + 1) * batch_size)`` of
   each full global batch, so the union of the ranks' ``i``-th batches is the same set of
   examples for every ``world_size`` dividing ``G``: a run on 8 ranks of 32 is replayed on
   one rank of 256. Of the short last global batch, rank ``r`` takes positions
   ``[r g / R, (r + 1) g / R)`` (``R = world_size``); with ``even_ranks="repeat"``
   (default) a rank one row short repeats its own first row (a rank with none, the
   batch's first), so every rank gets ``ceil(g / R)`` rows (at most ``R - 1`` repeats an
   epoch); with ``"drop"`` a long rank drops its last row (``g // R`` each; none left: the
   batch is dropped). Every rank yields the same number of batches, so data-parallel
   training never waits on a rank that ran out.
4. **Workers.** Worker ``w`` of ``W`` yields the rank's batches ``w, w + W, w + 2W, ...``
   (counted from where the iteration starts): a ``DataLoader``, which takes one batch from
   each worker in turn, yields exactly the rank's batches in order, for any ``W``.

**Decoding is divided.** A rank whose number divides ``partitions`` reads only its lanes, and
a worker whose number (per rank) divides ``turns`` only its turns: each process decodes about
its share of the blocks (the blocks cut by a part's edge once more). Other world sizes and
worker counts read the same order, and the processes sharing a part each decode it. A
reader holds one decoded window per part it reads (``partitions * turns`` windows of
``window`` blocks in a single process: 32 blocks by default, no more than the one-lane order
``partitions=1, turns=1, window=28``, windows of 28 blocks).

Reading: a part's window is decoded when a batch first needs it, piece by piece (the reader asked
for each piece's rows only, `ShardReader.read_blocks`), a block of rows at a time, into
the arrays of a done window, of this iteration or the last (`glyphforge.builds.stream.windows`). A
batch in one window is a view of it, unless this iterator's next batch reads past it: then a copy.
One process reading every part (one rank, one worker, ``partitions * turns > 1``) decodes the
windows straight into batch order instead (`~glyphforge.builds.stream.windows.Ring`): each
batch is a view, never a copy out of the windows of its lanes.

**From the decoded copy.** Once the entry has a decoded copy (made by random access or
``ds.materialize()``, by any process), the stream reads there instead of inflating shards
(`glyphforge.builds.stream.from_copy`): the same order, batches (byte for byte) and states, so a
state taken on one resumes on the other; every row checked against its CRC32 as random access
checks it, and a damaged copy dropped with a WARNING, the stream going on from the shards.
A dataset opened with ``random_access="decode"`` streams from the shards.

**Resuming.** ``stream.state_dict()`` is small and JSON-able: the dataset's entry ``key``, the
order, and the position (its fields and their rules: `glyphforge.builds.stream.state`).
``stream.load_state_dict(state)`` (or ``ds.stream(..., resume=state)``) continues at
``rows``: nothing before it is decoded, and of a window it lands in only the rows to come
are kept (its pieces holding none are not read). On the same ``G`` the batches are exactly
those the uninterrupted run would have yielded next, on any number of ranks and workers
(elastic resume: decoding stays divided for world sizes dividing ``partitions``); on
another ``G`` the rest of the epoch (in the
order cut for the state's ``G``) is cut into the new global batches, each example once
(plus the repeats of rule 3), and later epochs are cut for the new ``G``. The seed,
shuffle, window, partitions, turns and dataset must be the state's: a state saved on
another dataset (another entry key, whatever its size) is refused
(`~glyphforge.builds.stream.state.ForeignStateError`). A loop iterating the stream itself
reads ``stream.state_dict()``; a loop over a ``DataLoader`` (whose workers iterate copies)
counts its steps and reads ``stream.state_after(steps)`` (epochs counted by arithmetic, at
once for any count); torchdata's ``StatefulDataLoader`` calls
``state_dict``/``load_state_dict`` in each worker itself.

**Epochs advance by themselves**: the stream keeps its position, so iterating it again
continues where the last iteration stopped, the next epoch after a whole one (persistent
``DataLoader`` workers get a new order each epoch). ``set_epoch(e)`` moves it to the start
of epoch ``e`` (it stays put when already in epoch ``e``: a resumed epoch goes on).

Within a ``torch.utils.data.DataLoader`` worker the stream reads
``torch.utils.data.get_worker_info()`` itself (only when torch is already imported:
glyphforge never imports it), so ``DataLoader(ds.stream(256), batch_size=None,
num_workers=2)`` splits the work among the loader's workers, and ``len(stream)`` (the
batches of one iteration: the rest of the current epoch, then whole epochs, up to
``epochs``) is what the loader yields. There each batch is gathered straight into shared
memory the worker reuses once the loop lets the batch go, which reaches the loop as tensors
with no copy beside (`glyphforge.builds.stream.worker_memory`).
"""
from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import numpy as np

from glyphforge._checks import check_int
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.builds.stream import plan as stream_plan
from glyphforge.builds.stream.from_copy import CopyReads
from glyphforge.builds.stream.plan import EpochPlan, Order, plan_epoch
from glyphforge.builds.stream.state import (
    LIMITS,
    STATE_VERSION,
    check_options,
    check_position,
    check_state,
    count_epochs,
)
from glyphforge.builds.stream.windows import Window, Windows, decode_window
from glyphforge.builds.stream.worker_memory import Blocks
from glyphforge.builds.stream.workers import torch_worker_info
from glyphforge.cache.declared import block_rows

EVEN_RANKS = ("repeat", "drop")
Batch = tuple[np.ndarray, dict[str, np.ndarray] | None]


@dataclass(frozen=True)
class ShardStream:
    """A resumable, re-iterable stream of ``(images, targets)`` batches (see the module docstring).

    Create it with ``BuiltDataset.stream``; ``len(stream)`` is the number of batches one
    iteration yields (for this rank, and this worker when ``num_workers > 1``).
    """

    dataset: ShardReader
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
    window: int = stream_plan.DEFAULT_WINDOW
    partitions: int = None  # type: ignore[assignment]  # None: DEFAULT_PARTITIONS with shuffle, else 1
    turns: int = None  # type: ignore[assignment]  # None: DEFAULT_TURNS with shuffle, else 1
    epoch: int = field(default=0, init=False)
    """The epoch the next iteration reads; with ``rows``, ``base`` and ``until``, the position (`state_dict`)."""
    rows: int = field(default=0, init=False, repr=False)
    base: int = field(default=0, init=False, repr=False)
    until: int | None = field(default=None, init=False, repr=False)
    """The epoch the iteration under way stops before (None: none is)."""
    began: tuple[int, int] | None = field(default=None, init=False, repr=False)
    """The position (epoch, rows) where the iteration under way began, in this process."""
    resumed_cut: tuple[int, int, int] | None = field(default=None, init=False, repr=False)
    """``(epoch, G, since)``: a resumed epoch's order is cut for the state's ``G``, not this stream's (since: where
    this stream's global batches began in it)."""
    memory: Windows | None = field(default=None, init=False, repr=False, compare=False)  # never pickled
    pool: Blocks | None = field(default=None, init=False, repr=False, compare=False)  # never pickled
    """A DataLoader worker's shared memory for its batches, kept for its next iteration (the next epoch)."""

    def __post_init__(self) -> None:
        options = {name: getattr(self, name) for name in (*LIMITS, "rank", "worker")}
        for name, value in check_options(options, self.shuffle).items():  # each within its bound (LIMITS)
            object.__setattr__(self, name, value)
        if self.even_ranks not in EVEN_RANKS:
            raise ValueError(f"even_ranks must be one of {', '.join(EVEN_RANKS)}, got {self.even_ranks!r}")
        if self.even_ranks == "drop" and len(self.dataset) < self.world_size:
            raise ValueError(f"even_ranks='drop' leaves no row for each of {self.world_size} ranks: the dataset "
                             f"has {len(self.dataset)}; use even_ranks='repeat' or fewer ranks")

    # -- position ---------------------------------------------------------------------
    def _move(self, epoch: int, rows: int = 0, base: int | None = None, until: int | None = None) -> None:
        for name, value in (("epoch", epoch), ("rows", rows), ("base", rows if base is None else base),
                            ("until", until)):
            object.__setattr__(self, name, value)

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at epoch ``epoch``, like ``DistributedSampler.set_epoch``.

        A stream already in epoch ``epoch`` (resumed, or stopped early) stays where it is.
        """
        if check_int("epoch", epoch, 0) != self.epoch:
            self._move(epoch)
            object.__setattr__(self, "began", None)

    def state_dict(self) -> dict[str, Any]:
        """Return the stream's position: a small JSON-able dict for `load_state_dict` (see the module docstring)."""
        return self._state(self.epoch, self.rows, self.base, self.until)

    def state_after(self, batches: int) -> dict[str, Any]:
        """Return the state after this rank's next ``batches`` batches (a loop over a ``DataLoader`` counts its steps).

        Parameters
        ----------
        batches
            Batches consumed, across epochs, since the start of the iteration under way
            in this process (a ``DataLoader`` without workers iterates the stream itself),
            else since the stream's position (`state_dict`; the workers iterate copies).

        Returns
        -------
        dict
            What `state_dict` would return after those batches (the epochs counted by arithmetic: at once).

        Raises
        ------
        ValueError
            ``batches`` is not an integer >= 0, or the stream yields no batch at all.
        """
        batches = check_int("batches", batches, 0)
        epoch, rows = (self.epoch, self.rows) if self.began is None else self.began
        ended, batches = count_epochs(batches, self._batches_from(rows), self.batches_per_rank)
        if ended:
            epoch, rows = epoch + ended, 0
        rows += batches * self.global_batch_size
        until = self.until if self.until is not None and epoch < self.until else None
        return self._state(epoch, rows, rows, until)  # numbered afresh from there: a new loader starts at it

    def _order(self) -> dict[str, Any]:
        """What the epochs' global order depends on besides the global batch (a state must match it)."""
        return {"seed": self.seed, "shuffle": self.shuffle, "window": self.window, "partitions": self.partitions,
                "turns": self.turns, "n_examples": len(self.dataset)}

    def _cut(self, epoch: int) -> int:
        """The global batch ``epoch``'s order is cut for: this stream's, or a resumed epoch's state's."""
        resumed = self.resumed_cut
        return resumed[1] if resumed is not None and resumed[0] == epoch else self.global_batch_size

    def _state(self, epoch: int, rows: int, base: int, until: int | None) -> dict[str, Any]:
        resumed = self.resumed_cut
        return {"version": STATE_VERSION, "key": self.dataset.key, **self._order(), "epoch": epoch,
                "cut": self._cut(epoch), "since": resumed[2] if resumed is not None and resumed[0] == epoch else None,
                "rows": rows, "base": base, "until": until, "batch_size": self.batch_size,
                "world_size": self.world_size}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue at the position ``state`` holds (from `state_dict` or `state_after`, on any number of ranks).

        Raises
        ------
        ForeignStateError
            ``state`` was saved on another built dataset (another entry key), or names none.
        ValueError
            ``state`` is not a stream state of this format, or was saved by a stream with
            another seed, shuffle, window or dataset size (another global order).
        """
        check_state(state, self.dataset.key, self.dataset.entry.kind, self._order())
        at = check_position(state, len(self.dataset))
        epoch, rows = at.epoch, at.rows
        object.__setattr__(self, "resumed_cut", (epoch, at.cut, rows) if rows and at.cut != self.global_batch_size
                           else None)
        same_cut = (state["batch_size"], state["world_size"]) == (self.batch_size, self.world_size)
        in_worker = torch_worker_info() is not None  # StatefulDataLoader: each worker gets its own state back
        self._move(epoch, rows, at.base if same_cut and in_worker else rows, at.until)  # workers: their own turns

    # -- sizes --------------------------------------------------------------------
    @property
    def global_batch_size(self) -> int:
        """Rows of one global batch: ``batch_size * world_size``."""
        return self.batch_size * self.world_size

    def _last_share(self, short: int) -> int:
        """Rows each rank takes of a short last global batch of ``short`` rows (0: the batch is dropped)."""
        if self.drop_last or not short:
            return 0
        return -(-short // self.world_size) if self.even_ranks == "repeat" else short // self.world_size

    def _batches_from(self, rows: int) -> int:
        """This rank's batches in the rest of an epoch from position ``rows``."""
        left = len(self.dataset) - rows
        return left // self.global_batch_size + bool(self._last_share(left % self.global_batch_size))

    @property
    def rows_per_rank(self) -> int:
        """Rows each rank yields in a whole epoch (the same for every rank)."""
        n = len(self.dataset)
        return n // self.global_batch_size * self.batch_size + self._last_share(n % self.global_batch_size)

    @property
    def batches_per_rank(self) -> int:
        """Batches each rank yields in a whole epoch."""
        return self._batches_from(0)

    @staticmethod
    def _turns(first: int, count: int, worker: int, num_workers: int) -> range:
        """The batch numbers of ``[first, first + count)`` that are ``worker``'s turns (numbered from 0)."""
        return range(first + (worker - first) % num_workers, first + count, num_workers)

    def __len__(self) -> int:
        first = (self.rows - self.base) // self.global_batch_size
        epochs = self.epochs if self.until is None else self.until - self.epoch
        count = (self._batches_from(self.rows) + (epochs - 1) * self.batches_per_rank) if epochs > 0 else 0
        return len(self._turns(first, count, self.worker, self.num_workers))

    # -- planning -------------------------------------------------------------------
    def plan(self, epoch: int) -> EpochPlan:
        """Return the global order of ``epoch``: its parts and windows (reads no data)."""
        order = Order(self.seed, self.shuffle, self.window, self.partitions, self.turns)
        return plan_epoch(self.dataset.index, order, epoch, self._cut(epoch), block_rows(self.dataset.layout))

    def positions(self, start: int, n_rows: int) -> np.ndarray | range:
        """This rank's positions of the global batch beginning at position ``start`` of an ``n_rows``-row epoch (a
        range for a full global batch: `EpochPlan.locate` places a run in a few array operations)."""
        size = min(self.global_batch_size, n_rows - start)
        if size == self.global_batch_size:
            low = start + self.rank * self.batch_size
            return range(low, low + self.batch_size)
        low, high = self.rank * size // self.world_size, (self.rank + 1) * size // self.world_size
        share = self._last_share(size)
        mine = np.arange(low, low + share, dtype=np.int64)
        mine[high - low:] = low if high > low else 0  # "repeat": its own first row, else the batch's ("drop": never)
        return start + mine

    # -- reading ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[Batch]:
        worker, num_workers = self.worker, self.num_workers
        info = torch_worker_info()
        if info is not None:  # inside a DataLoader worker: split this stream among the loader's workers too
            worker, num_workers = worker * info.num_workers + info.id, num_workers * info.num_workers
        # each shard is read once: keep none; the decoded copy is read when there is one, unless random_access="decode"
        reader = self.dataset.reopened(cache_shards=0, random_access="decode" if self.dataset.random_access == "decode"
                                       else "auto")
        until = self.epoch + self.epochs if self.until is None else self.until
        object.__setattr__(self, "began", (self.epoch, self.rows))
        if info is not None and self.pool is None:  # a worker's batches: in shared memory it reuses, epoch after epoch
            object.__setattr__(self, "pool", Blocks())
        shared = None if info is None else self.pool
        windows = self.memory or Windows()  # the arrays the last iteration decoded into, taken: one at a time
        object.__setattr__(self, "memory", None)
        windows.make, reads = None if shared is None else shared.batch, CopyReads(reader)
        # one process reading every part decodes its windows straight into batch order
        ring = windows.in_order(shared is None and num_workers == self.world_size == 1 and self.shuffle
                                and self.partitions * self.turns > 1)
        image_name, size = reader.image_name, self.global_batch_size
        try:
            for epoch in range(self.epoch, until):
                plan, base = self.plan(epoch), self.base
                first = (self.rows - base) // size
                last = first + self._batches_from(self.rows)
                after = -(last % num_workers) * size  # the next epoch's batches go on being numbered from `last`
                windows.release(list(windows.decoded))  # the windows of the epoch (or iteration) before
                reads.release(list(reads.windows))
                # a batch's places, once: the one before asks for them too (`_gather`'s ``later``)
                locate = lru_cache(maxsize=2)(partial(self._locate, plan))
                for number in self._turns(first, last - first, worker, num_workers):
                    start = base + number * size
                    places, numbers = locate(start)
                    arrays = self._from_copy(reads, plan, epoch, windows, places, numbers)
                    if arrays is None and ring is not None:
                        arrays = ring.batch(reader, plan, start, size, numbers, partial(self._places, epoch, skip=0))
                    elif arrays is None:
                        # this iterator's next batch (in a worker no batch is a view: as if none came next)
                        later = partial(locate, start + num_workers * size if shared is None else plan.n_rows)
                        arrays = windows.gather(plan, places, numbers, later,
                                                partial(self._decode, reader, plan, epoch))
                    if start + size >= plan.n_rows:
                        self._move(epoch + 1, 0, after, until)
                    else:  # one worker: number its batches from here (a loader made from it starts with its first)
                        self._move(epoch, start + size, base if num_workers > 1 else None, until)
                    yield (arrays.pop(image_name), arrays or None) if shared is None else shared.out(arrays, image_name)
                self._move(epoch + 1, 0, after, until)
        finally:  # the next iteration decodes into its arrays (its first epoch releases the windows held)
            object.__setattr__(self, "memory", windows)
        self._move(self.epoch, self.rows)  # the iteration is over: the next one numbers its batches afresh
        object.__setattr__(self, "began", None)

    def _from_copy(
        self, reads: CopyReads, plan: EpochPlan, epoch: int, windows: Windows, places: np.ndarray, numbers: np.ndarray
    ) -> dict[str, np.ndarray] | None:
        """Return the rows at ``places`` (in windows ``numbers``) read from the decoded copy; None: read the shards.

        The rows are copies, in arrays ``windows`` reuses (`glyphforge.builds.stream.from_copy`).
        """
        return reads.batch_at(plan, places, numbers, partial(self._window_rows, plan, epoch), windows.batch)

    def _window_rows(self, plan: EpochPlan, epoch: int, number: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The dataset's rows of window ``number``, in the epoch's order, and its pieces' runs ``(first row, rows)``."""
        pieces = plan.pieces(number)
        starts = self.dataset.index.start[plan.shard[pieces]].astype(np.int64) + plan.first[pieces]
        counts = plan.rows[pieces]
        runs = list(zip(starts.tolist(), counts.tolist(), strict=True))
        size = int(plan.ends[number]) - plan.begin(number)
        # place j holds the window's row permutation[j] (`_places` is its inverse), row i of its pieces end to end
        # being row i + (its piece's first row - the rows of the pieces before)
        order = self._permutation(epoch, number, size) if self.shuffle else np.arange(size, dtype=np.int64)
        if len(runs) == 1:
            return order + runs[0][0], runs
        return order + np.repeat(starts - (np.cumsum(counts) - counts), counts)[order], runs

    def _locate(self, plan: EpochPlan, start: int) -> tuple[np.ndarray, np.ndarray]:
        """The places and windows of this rank's rows of the batch at position ``start`` (none past the epoch)."""
        if start >= plan.n_rows:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return plan.locate(self.positions(start, plan.n_rows))

    def _decode(
        self, reader: ShardReader, plan: EpochPlan, epoch: int, number: int, first: int, windows: Windows
    ) -> Window:
        """Decode the rows of window ``number`` from place ``first`` on (`decode_window`)."""
        return decode_window(reader, plan, number, first, windows,
                             partial(self._places, epoch, number) if self.shuffle else None)

    def _places(self, epoch: int, number: int, size: int, skip: int) -> np.ndarray:
        """Where each row of window ``number`` (``size`` rows, in shard order) goes among its rows from ``skip`` on.

        The inverse of the window's permutation, less ``skip``: a row placed below 0 is consumed.
        """
        places = np.empty(size, np.int64)
        places[self._permutation(epoch, number, size)] = np.arange(-skip, size - skip)
        return places

    def _permutation(self, epoch: int, number: int, size: int) -> np.ndarray:
        """The shuffle of window ``number``'s ``size`` rows: place ``j`` of the window holds its row ``[j]``."""
        return np.random.default_rng([self.seed, epoch, number]).permutation(size)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """What ``isinstance`` sees: `TorchShardStream` where torch is imported (a stream made before it too)."""
        return __getattr__("TorchShardStream") if "torch" in sys.modules else type(self)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as its own class and fields (pickle's default checks ``__class__``, which torch's import changes)."""
        return _unpickled, (type(self), {**vars(self), "memory": None, "pool": None})

    def __repr__(self) -> str:
        return (f"<ShardStream of {self.dataset!r}: batch_size {self.batch_size}, rank {self.rank}/{self.world_size}, "
                f"worker {self.worker}/{self.num_workers}, epoch {self.epoch}, {len(self)} batches>")


def _unpickled(cls: type[ShardStream], fields: dict[str, Any]) -> ShardStream:
    """The stream `ShardStream.__reduce__` pickled."""
    stream = object.__new__(cls)
    vars(stream).update(fields)
    return stream


def open_stream(
    dataset: ShardReader, batch_size: int, resume: Mapping[str, Any] | None = None, **options: Any
) -> ShardStream:
    """Return ``ShardStream(dataset, batch_size, **options)`` at ``resume`` (a state) if given.

    It is a torch ``IterableDataset`` where torch is imported.
    """
    stream_class = __getattr__("TorchShardStream") if "torch" in sys.modules else ShardStream
    stream: ShardStream = stream_class(dataset, batch_size, **options)
    if resume is not None:
        stream.load_state_dict(resume)
    return stream


def __getattr__(name: str) -> Any:
    """``TorchShardStream``: `ShardStream` as a ``torch.utils.data.IterableDataset``, made on first use.

    Made only where torch is imported already (``open_stream``) or when a DataLoader
    worker unpickles one (where torch is imported by the loader).
    """
    if name != "TorchShardStream":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in globals():  # made already (open_stream calls this function directly)
        return globals()[name]
    import torch.utils.data

    torch_class = type("TorchShardStream", (ShardStream, torch.utils.data.IterableDataset), {
        "__module__": __name__, "__doc__": "A `ShardStream` that is a ``torch.utils.data.IterableDataset``.",
    })
    globals()[name] = torch_class
    return torch_class
