"""`BuiltDataset`: the reader of a built dataset, at any size, with bounded memory.

An entry made by `glyphforge.build` holds three files. ``arrays.pklz``: the shard files joined
without recompression, a plain multi-member gzip file (stdlib ``gzip`` reads it whole) whose ``i``-th
run of members holds shard ``i``'s arrays as ``.npy`` files in blocks of rows (`glyphforge.cache.npy_members`);
``index.npy``: each shard's byte offset, byte length and row range (`glyphforge.builds.reading.index`), so
a reader seeks to one shard and decodes only it; ``blocks.npy``: where each block of rows is
(`glyphforge.builds.reading.blocks`). The manifest's ``meta`` records
``n_examples``, ``n_shards``, ``layout`` (each array's dtype and per-example shape),
``metadata`` (what the spec's optional ``metadata()`` returned, e.g. the scenes'
``class_names``) and ``images`` (the name of the images array, chosen at build time by
`glyphforge.builds.making.shards.images_array`: ``metadata()``'s ``images``, else ``"images"``,
else the first array ``make_shard`` returned).

Reading:

* ``len(ds)``, ``ds[i]``, ``ds[a:b]``, ``ds.take(indices)``: decode only the shards
  holding the rows; the last ``cache_shards`` decoded shards are kept (an LRU), so
  neighbouring reads are cheap.
* Random access (``ds[i]`` in random order, ``ds.take(random rows)``, a ``DataLoader(ds, shuffle=True)``):
  once a shard must be decoded again after the LRU dropped it, reading shard by shard is thrashing, and
  (``random_access="auto"``, the default) the dataset makes a decoded copy of the entry, once per machine,
  and reads every row from it from then on (`glyphforge.builds.decoded_copy.life`), each checked: a WARNING
  says so (its size and where) before it is written. Without room on the disk for it, or beyond
  ``decoded_budget`` (`glyphforge.builds.decoded_copy.source`), one WARNING says why and it keeps decoding.
  ``ds.materialize()`` makes the copy at once; ``random_access="decode"`` never makes or looks for one by
  itself. A copy another process made is used from the first read; a damaged one is dropped and the shards read.
* ``ds.stream(...)``: resumable batches for training, a window of decoded blocks of each part in memory
  (`glyphforge.builds.stream.stream`).
* ``ds.export(dir)``: ``.npy`` files for ``numpy.load(mmap_mode="r")``, or Parquet files
  (`glyphforge.builds.export.files`); ``ds.to_hf()``: a Hugging Face ``datasets.Dataset``.
* ``ds.arrays``: everything at once, refused beyond ``arrays_limit`` bytes.

The dataset is identity, index and rows; what it reads shards from is its shard source
(`glyphforge.builds.reading.protocols.ShardSource`: an entry on disk, `glyphforge.builds.reading.entry_files`, or
at a URL, `glyphforge.builds.reading.remote_shards`), and the stream, export and decoded copy are parts
that take it as a `~glyphforge.builds.reading.protocols.ShardReader` and never import it.

A `BuiltDataset` pickles as a handle (its source's: the entry's path and key, or its URL), never
its arrays, so DataLoader workers and Dask tasks receive a few hundred bytes; one that cannot be
opened again in a worker says why at its first use there (`glyphforge.builds.reading.reopen`). An open one
holds its entry's read lock (`glyphforge.cache.locks.ReadLock`) until ``ds.close()`` or until it
is garbage collected, so ``glyphforge cache gc --max-size`` never evicts it.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from glyphforge import config
from glyphforge._checks import PathLike, check_int
from glyphforge.batching import batches
from glyphforge.builds.decoded_copy.rows import DecodedCopy
from glyphforge.builds.decoded_copy.source import CopySource
from glyphforge.builds.export.files import export
from glyphforge.builds.export.parquet import to_hf
from glyphforge.builds.reading.entry_files import EntryFiles
from glyphforge.builds.reading.index import ShardIndex
from glyphforge.builds.reading.members import Put, Scratch, Shard, decode_shard, layout_dtype, place_shard
from glyphforge.builds.reading.memory import default_arrays_limit
from glyphforge.builds.reading.own_built import announced, unpickled
from glyphforge.builds.reading.protocols import ShardSource
from glyphforge.builds.reading.reopen import handle
from glyphforge.builds.stream.plan import DEFAULT_WINDOW
from glyphforge.builds.stream.stream import ShardStream, open_stream
from glyphforge.cache import Entry
from glyphforge.context import DataContext
from glyphforge.datasets.class_names import ClassNames
from glyphforge.errors import ArgumentError
from glyphforge.hf import require
from glyphforge.urls import redacted

__all__ = ["DEFAULT_CACHE_SHARDS", "RANDOM_ACCESS", "BuiltDataset", "DatasetTooLargeError"]

T = TypeVar("T")

DEFAULT_CACHE_SHARDS = 4
#: The values of ``BuiltDataset(random_access=...)``.
RANDOM_ACCESS = ("auto", "decode", "materialize")

class DatasetTooLargeError(ArgumentError, MemoryError):
    """``ds.arrays`` would decode more bytes than ``ds.arrays_limit`` allows."""


class BuiltDataset:
    """A built dataset in the cache, read shard by shard (see the module docstring).

    ``ds.key`` and ``ds.path`` locate the entry (``ds.url``: its URL, for one read where it lies;
    ``ds.source``: what its shards are read from); ``ds.metadata`` is what the spec's
    optional ``metadata()`` returned (for scenes: ``class_names``, also ``ds.classes``);
    ``ds.layout`` each array's dtype and per-example shape; ``ds.entry.meta`` the whole
    manifest record.

    It is map-style, like the EMNIST and Omniglot datasets: ``ds[i]`` is ``(image,
    targets)`` with ``targets`` a dict of the other arrays' rows ``i`` (empty when there are
    none; a slice or an index array gives stacked rows), so torch's default collate batches
    it in any ``DataLoader``; ``ds["images"]`` is one whole array. ``images`` is the array named by :attr:`image_name`.

    Parameters
    ----------
    entry
        The cache entry of a build, read in place; or the `~glyphforge.builds.reading.protocols.ShardSource` to read
        its shards from (`glyphforge.open_built` gives one for an entry at a URL).
    cache_shards
        How many decoded shards to keep for the next reads (0: none).
    arrays_limit
        The most bytes ``ds.arrays`` (and ``ds["name"]``, ``ds.images``, ``ds.batches``)
        may decode; None: `~glyphforge.builds.reading.memory.default_arrays_limit` (half the memory available).
    random_access
        How ``ds[i]`` and ``ds.take`` read rows: ``"auto"`` (decode shards until reads thrash
        the LRU, then make and read a decoded copy where the disk has room; see the module
        docstring), ``"materialize"`` (the decoded copy from the first read; no room raises
        `glyphforge.builds.decoded_copy.life.NotEnoughSpaceError`) or ``"decode"`` (shards only,
        unless ``ds.materialize()`` is called). A copy already made is read in ``"auto"`` and ``"materialize"``.
    decoded_budget
        The most bytes ``"auto"`` may write for a decoded copy by itself (or text such as ``"10GB"``; 0: none);
        None: ``$GLYPHFORGE_DECODED_BUDGET``, else a quarter of the free space.
    """

    def __init__(self, entry: Entry | ShardSource, *, cache_shards: int = DEFAULT_CACHE_SHARDS,
                 arrays_limit: int | None = None, random_access: str = "auto",
                 decoded_budget: int | str | None = None) -> None:
        if random_access not in RANDOM_ACCESS:
            raise ValueError(f"random_access must be one of {', '.join(map(repr, RANDOM_ACCESS))}, got "
                             f"{random_access!r}")
        self.source: ShardSource = EntryFiles(entry) if isinstance(entry, Entry) else entry
        self.entry = announced(self.source.entry)  # an own copy (unverified) is said so, once per process
        self._length = int(self.entry.meta["n_examples"])
        self.cache_shards = check_int("cache_shards", cache_shards, 0)
        self.arrays_limit = None if arrays_limit is None else check_int("arrays_limit", arrays_limit, 0)
        self.random_access = random_access
        config.decoded_budget_setting(decoded_budget)  # a bad size (or $GLYPHFORGE_DECODED_BUDGET) is refused here
        self.decoded_budget = decoded_budget
        self._copies = CopySource()
        self._thrashing = False  # a shard was decoded again after the LRU dropped it
        self._dropped: set[int] = set()
        self._arrays: dict[str, np.ndarray] | None = None
        self._decoded: OrderedDict[int, Shard] = OrderedDict()
        self._lock = threading.Lock()
        self._read_lock = self.entry.read_lock()  # held while open: `cache gc --max-size` leaves the entry alone
        self._read_lock.acquire()
        weakref.finalize(self, self._read_lock.release)

    # -- what it is -------------------------------------------------------------
    @property
    def key(self) -> str:
        """The cache key of the entry."""
        return self.entry.key

    @property
    def path(self) -> Path:
        """The entry's directory."""
        return self.entry.path

    @property
    def url(self) -> str | None:
        """The entry's URL when it is read where it lies (`glyphforge.open_built`); None for an entry on disk."""
        return self.source.url

    @property
    def metadata(self) -> dict[str, Any]:
        """What the spec described of its output (``spec.metadata()``); empty if it has no such method."""
        return dict(self.entry.meta.get("metadata", {}))

    @property
    def classes(self) -> ClassNames | None:
        """The names that integer labels index (``metadata()``'s ``class_names``, as a map-style dataset's
        ``classes``); None when the spec gave none."""
        names = self.metadata.get("class_names")
        return None if names is None else ClassNames(names)

    @property
    def layout(self) -> dict[str, Any]:
        """Each array's ``{"dtype": numpy descr, "shape": per-example shape}``, by name."""
        return dict(self.entry.meta["layout"])

    @property
    def index(self) -> ShardIndex:
        """Where each shard is in ``arrays.pklz`` and which rows it holds (checked against the file)."""
        return self.source.index

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        at = "" if self.url is None else f" at {redacted(self.url)}"
        return f"<BuiltDataset {self.entry.kind} {self.key[:12]}{at}: {len(self)} examples, arrays {list(self.layout)}>"

    def close(self) -> None:
        """Let the entry go: release its read lock, so `glyphforge cache gc --max-size` may evict it.

        The dataset holds the lock from its creation until this, or until it is garbage collected. An entry at a URL
        also stops its prefetch threads.
        """
        self.source.close()
        self._read_lock.release()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a handle: its source's (an entry's path and key, or its URL), never the arrays (`reopen`)."""
        return handle(_reopen, self.source, (self.cache_shards, self.arrays_limit, self.random_access,
                                             self.decoded_budget))

    @property
    def materialized(self) -> Path | None:
        """The decoded copy this dataset reads rows from (see the module docstring), None while it decodes shards."""
        return None if self._copies.copy is None else self._copies.copy.path

    def materialize(self) -> Path:
        """Make the entry's decoded copy (once per machine: another process's is used) and read rows from it.

        An explicit request: no ``decoded_budget``, only the disk's reserve (see the module docstring).

        Returns
        -------
        Path
            The copy's directory, ``<root>/<kind>/<key>.decoded``.

        Raises
        ------
        NotEnoughSpaceError
            Its disk has no room for it (the message says how much it needs); nothing was written.
        ForeignCopyError
            ``<key>.decoded`` is not glyphforge's (a symbolic link...); nothing was read or changed there.
        StorageError
            Writing it failed (full, read-only, forbidden); nothing is left behind.
        """
        return self._copies.materialize(self)

    # -- random access ----------------------------------------------------------
    def shard(self, number: int) -> Shard:
        """Return shard ``number``'s arrays, decoded from its gzip member (or from the LRU of decoded shards)."""
        with self._lock:
            if number in self._decoded:
                self._decoded.move_to_end(number)
                return self._decoded[number]
        arrays = self._decode(number)
        with self._lock:
            self._thrashing = self._thrashing or number in self._dropped
            if not self.cache_shards:
                self._dropped.add(number)
            else:
                self._decoded[number] = arrays
                while len(self._decoded) > self.cache_shards:
                    self._dropped.add(self._decoded.popitem(last=False)[0])
        return arrays

    def _decode(self, number: int) -> Shard:
        """Decode shard ``number`` whole, checked against what the index and layout say (`decode_shard`)."""
        return self.source.read(number, decode_shard)

    def read_blocks(self, number: int, put: Put, scratch: Scratch, rows: tuple[int, int] | None = None) -> None:
        """Hand shard ``number``'s arrays (at least its ``rows``: ``(first, stop)``; None: all) to ``put(name,
        first_row, block)`` a block of rows at a time.

        The blocks are ``scratch``'s buffers, reused (`glyphforge.builds.reading.members.place_shard`):
        nothing of the shard is kept, and no fresh memory is faulted in for it.
        """
        self.source.read(number, lambda member: place_shard(member, put, scratch, rows))

    def take(self, indices: Any) -> dict[str, np.ndarray]:
        """Return rows ``indices`` (ints, negative from the end) of every array, in that order.

        From the decoded copy when there is one (see ``random_access``), else only the shards
        holding those rows are decoded, one at a time.
        """
        wanted = self._rows(indices)
        if self._arrays is not None:
            return {name: array[wanted] for name, array in self._arrays.items()}
        taken = self._copies.read(self, self._thrashing, DecodedCopy.take, wanted)
        if taken is not None:
            return taken
        out = self._empty(len(wanted))
        if not len(wanted):
            return out
        index = self.index
        shards = index.shard_of(wanted)
        by_shard = np.argsort(shards, kind="stable")  # positions grouped by shard, in one sort
        numbers, firsts = np.unique(shards[by_shard], return_index=True)
        for number, where in zip(numbers, np.split(by_shard, firsts[1:]), strict=True):
            rows = wanted[where] - index.start[number]
            for name, array in self.shard(int(number)).items():
                out[name][where] = array[rows]
        return out

    def __getitem__(self, index: Any) -> Any:
        """``ds[name]``: one whole array; ``ds[i]``, ``ds[a:b]``, ``ds[index array]``: ``(images, targets dict)``."""
        if isinstance(index, str):
            if index not in self.entry.meta["layout"]:
                names = ", ".join(self.entry.meta["layout"])
                raise KeyError(f"{self.entry.kind} has no array {index!r}; it has {names}")
            return self.arrays[index]
        if isinstance(index, slice):
            rows = self.take(np.arange(len(self))[index])
        elif isinstance(index, (int, np.integer)):
            row = int(index) % len(self) if self._arrays is None and -len(self) <= index < len(self) else None
            found = None if row is None else self._copies.read(self, self._thrashing, DecodedCopy.row, row)
            rows = found if found is not None else {name: array[0] for name, array in self.take([index]).items()}
        else:
            rows = self.take(index)
        image = rows.pop(self.image_name)
        return image, rows

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for number in range(len(self.index)):
            arrays = dict(self.shard(number))
            images = arrays.pop(self.image_name)
            for row in range(len(images)):
                yield images[row], {name: array[row] for name, array in arrays.items()}

    # -- everything at once -------------------------------------------------------
    def dtype(self, name: str) -> np.dtype[Any]:
        """The dtype of array ``name``."""
        return layout_dtype(self.layout[name]["dtype"])

    @property
    def nbytes(self) -> int:
        """The decoded size of all arrays, in bytes."""
        return len(self) * self._row_nbytes()

    def _row_nbytes(self) -> int:
        """The bytes of one row of every array, as the layout declares them."""
        return sum(layout_dtype(info["dtype"]).itemsize * int(np.prod(info["shape"], dtype=np.int64))
                   for info in self.layout.values())

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """All arrays, decoded once and kept (refused beyond ``arrays_limit``, see the class docstring).

        Read from the entry's decoded copy when there is one (`materialize`), else decoded shard by shard.
        """
        if self._arrays is None:
            limit = default_arrays_limit() if self.arrays_limit is None else self.arrays_limit
            if self.nbytes > limit:
                raise DatasetTooLargeError(
                    f"{self.entry.kind} {self.key[:12]} decodes to {self.nbytes / 1e9:.2f} GB, more than the "
                    f"{limit / 1e9:.2f} GB ds.arrays may fill (arrays_limit; default half the available memory). "
                    "Read what you need with ds.take(indices) or ds[i], train from ds.stream(batch_size), or "
                    "write .npy files for memory-mapping with ds.export(dir); or raise ds.arrays_limit"
                )
            out = self._empty(len(self))
            if self._copies.read(self, None, DecodedCopy.read_into, out) is None:  # no copy: decode the shards
                index = self.index
                for number in range(len(index)):
                    rows = slice(int(index.start[number]), int(index.stop[number]))
                    with self._lock:
                        cached = self._decoded.get(number)
                    for name, array in (self._decode(number) if cached is None else cached).items():
                        out[name][rows] = array
            self._arrays = out
        return self._arrays

    @property
    def image_name(self) -> str:
        """The array ``ds[i]`` and batches give first, as recorded at build time (see the module docstring).

        ``metadata()``'s ``images``, else ``"images"``, else the first array ``make_shard``
        returned.
        """
        return str(self.entry.meta["images"])

    def reopened(self, **options: Any) -> BuiltDataset:
        """A new reader of the same entry (its own LRU), with ``cache_shards``, ``arrays_limit``, ``random_access`` or
        ``decoded_budget`` changed."""
        settings = {"cache_shards": self.cache_shards, "arrays_limit": self.arrays_limit,
                    "random_access": self.random_access, "decoded_budget": self.decoded_budget, **options}
        return BuiltDataset(self.source.sibling(), **settings)  # an entry at a URL: the same fetcher

    def read_copy(self, read: Callable[[DecodedCopy], T]) -> T | None:
        """``read(copy)`` of the entry's decoded copy when one is made (none is made here); None: read the shards.

        None also with ``random_access="decode"``, and when ``read`` raises
        `~glyphforge.builds.decoded_copy.rows.DamagedCopyError`: the copy is dropped, with a WARNING,
        and this reader reads no copy any more (the stream reads it: `glyphforge.builds.stream.from_copy`).
        """
        return self._copies.read(self, None, read)

    def prefetch(self, shards: Any) -> None:
        """Hint that ``shards`` will be read soon (the stream's next windows): an entry at a URL fetches them ahead.

        A no-op for an entry on disk.
        """
        self.source.prefetch(shards)

    @property
    def images(self) -> np.ndarray:
        """The images array, :attr:`image_name` (every row: see :attr:`arrays`)."""
        return self.arrays[self.image_name]

    @property
    def labels(self) -> dict[str, np.ndarray] | None:
        """Every array but :attr:`images`, by name (None when there is no other array)."""
        targets = {name: array for name, array in self.arrays.items() if name != self.image_name}
        return targets or None

    def batches(self, *, batch_size: int, **options: Any) -> Iterator[tuple[Any, Any]]:
        """Yield ``(images, targets dict)`` batches of ``ds.arrays`` (:func:`glyphforge.batches`).

        For datasets larger than memory use :meth:`stream`.
        """
        return batches(self.images, self.labels, batch_size=batch_size, **options)

    # -- streaming and export -------------------------------------------------------
    def stream(
        self, batch_size: int, *, shuffle: bool = True, seed: int = 0, epochs: int = 1, drop_last: bool = False,
        rank: int = 0, world_size: int = 1, worker: int = 0, num_workers: int = 1, even_ranks: str = "repeat",
        window: int = DEFAULT_WINDOW, partitions: int | None = None, turns: int | None = None,
        resume: Mapping[str, Any] | None = None,
    ) -> ShardStream:
        """Return a re-iterable, resumable stream of ``(images, targets)`` batches (`glyphforge.builds.stream`).

        Parameters
        ----------
        batch_size
            The rows of each of this rank's batches; the global batch is ``batch_size * world_size`` rows.
        shuffle
            A new order each epoch (False: the dataset's own order).
        seed
            Seeds each epoch's order with the epoch: the same seed, the same batches on any number of ranks.
        epochs
            The epochs one iteration reads (a resumed or stopped one finishes its epoch first).
        drop_last
            Drop each epoch's last global batch when it is short.
        rank, world_size
            This process's rank of ``world_size`` data-parallel ranks: each takes its positions of each global batch.
        worker, num_workers
            This worker of the rank's ``num_workers`` (a ``DataLoader``'s workers set them themselves).
        even_ranks
            How the ranks share the short last global batch: ``"repeat"`` (a rank one row short repeats a row) or
            ``"drop"`` (a longer rank drops its last row), so every rank yields as many batches.
        window
            The blocks of a part (1 MiB of rows each) shuffled (and held decoded) together.
        partitions, turns
            The lanes and turns each epoch's order is cut into (None: 16 and 2 with ``shuffle``, else 1 and 1); a rank
            whose number divides ``partitions`` decodes only its lanes, a worker dividing ``turns`` only its turns.
        resume
            A ``stream.state_dict()`` to continue from (on any number of ranks).
        """
        return open_stream(self, batch_size, resume=resume, shuffle=shuffle, seed=seed, epochs=epochs,
                           drop_last=drop_last, rank=rank, world_size=world_size, worker=worker,
                           num_workers=num_workers, even_ranks=even_ranks, window=window, partitions=partitions,
                           turns=turns)

    def to_hf(self) -> Any:
        """Every row as a Hugging Face ``datasets.Dataset`` in memory over ``ds.arrays`` (no copy; the ``hf`` extra).

        One column per array, labels as ``ClassLabel`` (`glyphforge.builds.export.parquet`). Beyond ``arrays_limit``,
        ``ds.export(dir, "parquet")`` and ``datasets.load_dataset("parquet", ...)`` read any size.
        """
        require("ds.to_hf()")  # before anything is decoded
        return to_hf(self, self.arrays)

    def export(self, directory: PathLike, format: str = "npy", *, overwrite: bool = False,
               context: DataContext | None = None) -> Path:
        """Write every array as ``<directory>/<name>.npy`` plus ``metadata.json``, or Parquet files with
        ``format="parquet"`` (see `glyphforge.builds.export.files`).

        ``context``: the data context whose data dir is refused as a target too (None: the environment's).
        """
        return export(self, directory, context=DataContext.resolve(context), format=format, overwrite=overwrite)

    def publish(self, url: str, *, storage_options: Mapping[str, Any] | None = None, progress: bool = True) -> str:
        """Upload the entry to the data dir URL ``url`` (``s3://bucket/data``...); return the entry's URL.

        Data files first, the manifest last; resumes an interrupted upload and does nothing when the
        entry is there already (see `glyphforge.cache.remote.publish`). The URL returned,
        ``<url>/cache/<kind>/<key>``, is what `glyphforge.open_built` takes.
        """
        from glyphforge.cache.remote.publish import publish_entry

        return publish_entry(self.entry, url, storage_options=storage_options, progress=progress).url

    # -- helpers ------------------------------------------------------------------------
    def _rows(self, indices: Any) -> np.ndarray:
        wanted = np.asarray(indices)
        if wanted.dtype == bool or (wanted.size and not np.issubdtype(wanted.dtype, np.integer)):
            raise TypeError(f"example indices must be integers, got {wanted.dtype} {indices!r:.60}")
        wanted = wanted.astype(np.int64).reshape(-1)
        n = len(self)
        if wanted.size and (wanted.min() < -n or wanted.max() >= n):
            raise IndexError(f"example indices must be in -{n}..{n - 1}, got {indices!r:.80}")
        return np.where(wanted < 0, wanted + n, wanted)

    def _empty(self, count: int) -> dict[str, np.ndarray]:
        return {name: np.empty((count, *info["shape"]), layout_dtype(info["dtype"]))
                for name, info in self.layout.items()}


def _reopen(source: ShardSource, cache_shards: int, arrays_limit: int | None, random_access: str,
            decoded_budget: int | str | None) -> BuiltDataset:
    """Open the built dataset again from ``source`` (unpickled by `reopen`); a DataLoader worker's copy finds the
    decoded copy the parent made, and does not say again that the entry is an own copy (the parent said so, once)."""
    unpickled(source.entry)
    return BuiltDataset(source, cache_shards=cache_shards, arrays_limit=arrays_limit, random_access=random_access,
                        decoded_budget=decoded_budget)
