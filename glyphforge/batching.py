"""Seeded mini-batches and the map-style dataset protocol every glyphforge dataset follows.

Every dataset in glyphforge (EMNIST, Omniglot, built scenes, `glyphforge.ImageList`)
is *map-style*: ``len(ds)`` and ``ds[i] -> (image, label)``. That is the whole
protocol a PyTorch ``DataLoader`` needs, so none of this imports torch. :func:`rebatch`
is the one place rows are cut into batches: :func:`batches` cuts its visiting orders
with it (a built dataset's stream cuts positions of its epoch's order by arithmetic,
`glyphforge.builds.stream.stream`). This module needs only
numpy (``import glyphforge`` loads it through the builder).
"""
from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from glyphforge._checks import check_int

__all__ = ["Indexable", "MapStyleDataset", "batch_indices", "batches", "join_rows", "rebatch"]


class Indexable(Protocol):
    """Anything with ``len()`` that accepts an integer index array in ``[]``."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any) -> Any: ...


def batches(
    x: Indexable,
    y: Indexable | Mapping[str, Indexable] | None = None,
    *,
    batch_size: int,
    shuffle: bool = False,
    seed: int | np.random.Generator | None = None,
    drop_last: bool = False,
    wrap: bool = False,
    epochs: int | None = 1,
) -> Iterator[tuple[Any, Any]]:
    """Yield ``(x_batch, y_batch)`` mini-batches over one or more epochs.

    Each epoch visits every item once, in order ``0..n-1`` or, with ``shuffle``,
    in a fresh permutation. All permutations come from one
    ``numpy.random.default_rng(seed)``, drawn one per epoch, so a seed fixes the
    whole sequence and ``epochs=k`` yields a prefix of ``epochs=k+1``.

    How the items are cut into batches:

    ============  ==========  ==============================================
    ``wrap``      drop_last   batches
    ============  ==========  ==============================================
    False         False       per epoch; each epoch's last batch may be short
    False         True        per epoch; each epoch's short last batch dropped
    True          False       the epochs form one stream cut every
                              ``batch_size`` items, so a batch may span two
                              epochs; a short final batch is completed from
                              the start of the next order (the permutation
                              the next epoch would use), so **every** batch
                              has ``batch_size`` items
    True          True        the same stream, but the short final batch is
                              dropped: every batch is full and no item comes
                              from beyond the last epoch
    ============  ==========  ==============================================

    With ``wrap`` items borrowed from the next epoch are consumed, not repeated:
    ``epochs=2, wrap=True`` over 10 items with ``batch_size=4`` yields
    ``[0 1 2 3] [4 5 6 7] [8 9 0 1] [2 3 4 5] [6 7 8 9]``. A ``batch_size``
    larger than the data is allowed; a wrapped batch then spans several orders.
    An empty ``x`` yields nothing.

    Parameters
    ----------
    x, y
        Numpy arrays, Python lists/tuples (converted with ``numpy.asarray``), or
        any map-style sequence with ``len()`` that accepts an integer index array
        (for example ``ImageList.images``). ``y`` is optional; it may also be a
        dict of such arrays (several targets, e.g. a built scenes dataset's
        ``boxes`` and ``labels``), batched to a dict of the same names.
    batch_size
        Items per batch, a positive integer.
    shuffle
        Visit each epoch in a fresh random permutation.
    seed
        Seed (or Generator) for ``numpy.random.default_rng``; ``None`` draws
        fresh entropy. Ignored without ``shuffle``.
    drop_last, wrap
        What to do with a short last batch; see the table above.
    epochs
        Number of passes (>= 1), or ``None`` to repeat forever.

    Yields
    ------
    tuple
        ``(x[idx], y[idx])`` for an int64 index array ``idx``; ``y_batch`` is
        ``None`` when ``y`` is ``None``, and ``{name: y[name][idx]}`` for a dict ``y``. For numpy arrays these
        are fresh copies.

    Raises
    ------
    ValueError
        A bad ``batch_size`` or ``epochs``, ``x`` and ``y`` of different lengths,
        or ``drop_last`` without ``wrap`` and ``epochs=None`` when
        ``batch_size`` exceeds the data (an endless loop yielding nothing).
    """
    x = _as_indexable(x)
    named = isinstance(y, Mapping)
    columns: dict[str, Indexable] = dict(y) if isinstance(y, Mapping) else {} if y is None else {"y": y}
    for name, column in columns.items():
        columns[name] = column = _as_indexable(column)
        if len(column) != len(x):
            what = f"y[{name!r}]" if named else "y"
            raise ValueError(f"x has {len(x)} items but {what} has {len(column)}; they must pair up one to one")
    indices = batch_indices(
        len(x), batch_size=batch_size, shuffle=shuffle, seed=seed,
        drop_last=drop_last, wrap=wrap, epochs=epochs,
    )
    return _take_batches(x, columns, named, indices)


def _take_batches(
    x: Indexable, columns: dict[str, Indexable], named: bool, indices: Iterator[np.ndarray]
) -> Iterator[tuple[Any, Any]]:
    for idx in indices:
        taken = {name: column[idx] for name, column in columns.items()}
        yield x[idx], taken if named else taken.get("y")


#: The name :func:`batch_indices` gives its index arrays when it cuts them with :func:`rebatch`.
INDEX = "index"


def batch_indices(
    n: int,
    *,
    batch_size: int,
    shuffle: bool = False,
    seed: int | np.random.Generator | None = None,
    drop_last: bool = False,
    wrap: bool = False,
    epochs: int | None = 1,
) -> Iterator[np.ndarray]:
    """The int64 index arrays :func:`batches` uses for ``n`` items (same keywords)."""
    batch_size = check_int("batch_size", batch_size, 1)
    if epochs is not None:
        epochs = check_int("epochs", epochs, 1)
    elif drop_last and not wrap and 0 < n < batch_size:
        raise ValueError(
            f"drop_last=True with batch_size={batch_size} > {n} items drops every batch; "
            "with epochs=None that loops forever. Use a smaller batch_size or wrap=True"
        )
    rng = np.random.default_rng(seed) if shuffle else None
    if n == 0:
        return iter(())
    orders = _orders(n, rng)
    if not wrap:
        cut = (rebatch([{INDEX: order}], batch_size, drop_last) for order in itertools.islice(orders, epochs))
        return (batch[INDEX] for batch in itertools.chain.from_iterable(cut))
    chunks: Iterator[np.ndarray] = itertools.islice(orders, epochs)
    if epochs is not None and not drop_last:  # complete the short final batch from the next orders
        chunks = itertools.chain(chunks, _first_items(orders, -n * epochs % batch_size))
    return (batch[INDEX] for batch in rebatch(({INDEX: chunk} for chunk in chunks), batch_size, drop_last))


def _orders(n: int, rng: np.random.Generator | None) -> Iterator[np.ndarray]:
    """Endless per-epoch visiting orders: permutations from ``rng``, or ``0..n-1``."""
    while True:
        yield np.arange(n, dtype=np.int64) if rng is None else rng.permutation(n)


def _first_items(orders: Iterator[np.ndarray], count: int) -> Iterator[np.ndarray]:
    """The first ``count`` items of ``orders`` taken end to end, as pieces of whole orders."""
    while count > 0:
        piece = next(orders)[:count]
        count -= len(piece)
        yield piece


def rebatch(
    chunks: Iterable[dict[str, np.ndarray]], size: int, drop_last: bool
) -> Iterator[dict[str, np.ndarray]]:
    """Re-cut chunks of rows into batches of ``size`` rows: the one batcher of glyphforge.

    Each chunk is a dict of arrays with the same number of rows (its first axis), and
    every chunk has the same names. The rows, taken end to end across the chunks, are
    cut every ``size`` rows; a batch lying in one chunk is a view of it, one spanning
    chunks is a concatenation. The short last batch is yielded, or dropped with
    ``drop_last``. :func:`batches` cuts its visiting orders with it.

    Parameters
    ----------
    chunks
        The rows, in order: dicts of name -> array (chunks with no rows are skipped).
    size
        Rows per batch, a positive integer.
    drop_last
        Drop the short last batch instead of yielding it.

    Yields
    ------
    dict of str to numpy.ndarray
        One batch: the same names as the chunks, ``size`` rows each (fewer for the last).
    """
    held: list[dict[str, np.ndarray]] = []
    count = 0
    for chunk in chunks:
        rows = len(next(iter(chunk.values())))
        at = 0
        if held:  # complete the batch begun in earlier chunks
            take = min(size - count, rows)
            held.append({name: array[:take] for name, array in chunk.items()})
            count, at = count + take, take
            if count == size:
                yield join_rows(held)
                held, count = [], 0
        while rows - at >= size:
            yield {name: array[at:at + size] for name, array in chunk.items()}
            at += size
        if at < rows:
            held.append({name: array[at:] for name, array in chunk.items()})
            count += rows - at
    if held and not drop_last:
        yield join_rows(held)


def join_rows(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join the rows of ``parts`` (dicts of the same arrays), array by array."""
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def _as_indexable(data: Any) -> Indexable:
    return np.asarray(data) if isinstance(data, (list, tuple)) else data


#: The label ``ds[i]`` gives an item of a `MapStyleDataset` without labels.
UNLABELLED = -1


class MapStyleDataset:
    """Mixin giving a dataset ``len``, ``[i]``, iteration and :meth:`batches`.

    A subclass sets two attributes, typically in ``__init__``:

    ``images``
        A numpy array (or memmap) with one item per row, or any sequence with
        ``len()`` that accepts an int or an int index array.
    ``labels``
        An array of the same length, or ``None`` for unlabelled data: ``ds[i]`` then gives
        the label -1 (``UNLABELLED``, as torchvision's unlabelled STL10 split), which a PyTorch
        ``DataLoader``'s default collate batches (it cannot batch ``None``).

    and optionally ``transform``, a callable applied to the image by ``ds[i]`` (e.g. a
    torchvision transform; not by :meth:`batches`), and ``target_transform``, one applied to
    the label by ``ds[i]`` (as torchvision's), and inherits ``len(ds)``,
    ``ds[i] -> (image, label)`` (``ds[index_array]`` gives stacked batches),
    ``for image, label in ds`` and ``ds.batches(...)``. It may override
    ``__len__``/``__getitem__``; :meth:`batches` only uses ``images`` and ``labels``.
    ``len`` plus ``[i]`` is all a PyTorch ``DataLoader`` needs.
    """

    images: Any
    labels: Any
    transform: Callable[[Any], Any] | None = None
    target_transform: Callable[[Any], Any] | None = None

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: Any) -> tuple[Any, Any]:
        images = self.images[index]
        image = images if self.transform is None else self.transform(images)
        if self.labels is None:  # no target_transform: there is no label to transform
            return image, UNLABELLED if isinstance(index, (int, np.integer)) else np.full(len(images), UNLABELLED)
        label = self.labels[index]
        return image, label if self.target_transform is None else self.target_transform(label)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return (self[i] for i in range(len(self)))

    def batches(self, *, batch_size: int, **options: Any) -> Iterator[tuple[Any, Any]]:
        """``batches(self.images, self.labels, ...)``: same keywords as :func:`batches`."""
        return batches(self.images, self.labels, batch_size=batch_size, **options)

    def to_hf(self) -> Any:
        """``images`` and ``labels`` as a Hugging Face ``datasets.Dataset`` in memory (no copy; the ``hf`` extra).

        Columns ``image`` (``Image()`` for uint8 ``(H, W)`` or ``(H, W, 3)`` images, else ``Array2D``...) and
        ``label`` (a ``ClassLabel`` named by ``classes`` when the dataset has them), as on the Hub's MNIST and
        as `glyphforge.hf` converts them; ``transform`` is not applied.
        """
        from glyphforge.hf import dataset, require

        require("ds.to_hf()")
        every = np.arange(len(self))
        arrays = {name: np.asarray(column if isinstance(column, np.ndarray) else column[every])  # lazy: read
                  for name, column in (("images", self.images), ("labels", self.labels)) if column is not None}
        classes = getattr(self, "classes", None)
        names = {} if classes is None else {"labels": [str(name) for name in classes]}
        digest = hashlib.blake2b(digest_size=16)
        for array in arrays.values():
            digest.update(np.ascontiguousarray(array).data)
        digest.update(repr(names).encode())
        return dataset(arrays, names, f"glyphforge-{digest.hexdigest()}", "images")
