"""`BuiltDataset`: the reader of a built dataset in the cache.

An entry made by `glyphforge.build` holds one file, ``arrays.pklz``: the shard files
joined without recompression, so a multi-member gzip file whose member ``i`` is the
pickle of shard ``i``'s dict of arrays (see `glyphforge.builds.builder`). The
manifest's ``meta`` records ``n_examples``, ``n_shards``, ``layout`` (each array's
dtype and per-example shape), ``shard_bytes`` and ``metadata`` (what the spec's
optional ``metadata()`` returned, e.g. the scenes' ``class_names``).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._deprecation import warn_deprecated
from glyphforge.batching import batches
from glyphforge.cache import Entry

ARRAYS_FILE = "arrays.pklz"


class BuiltDataset:
    """A built dataset in the cache: its arrays, concatenated over all shards.

    ``ds["images"]`` is one array, ``ds.arrays`` all of them (loaded once, lazily),
    ``len(ds)`` the number of examples; ``ds.key`` and ``ds.path`` locate the entry;
    ``ds.metadata`` is what the spec's optional ``metadata()`` returned (for scenes:
    ``class_names``); ``ds.entry.meta`` is the whole manifest record.

    It is map-style, like the EMNIST and Omniglot datasets: ``ds[i]`` (an int,
    slice or index array) is ``(image, target)`` with ``image = ds.images[i]`` and
    ``target`` a dict of the other arrays' rows ``i``; ``ds.batches(...)`` yields
    ``(images, targets)`` the same way. ``images`` is the ``"images"`` array, or
    the first array when the spec makes none of that name.
    """

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._arrays: dict[str, np.ndarray] | None = None

    @property
    def key(self) -> str:
        """The cache key of the entry."""
        return self.entry.key

    @property
    def path(self) -> Path:
        """The entry's directory."""
        return self.entry.path

    @property
    def meta(self) -> dict[str, Any]:
        """Deprecated: the entry's manifest record; use ``ds.entry.meta`` (or ``ds.metadata`` for the spec's)."""
        warn_deprecated("BuiltDataset.meta", "BuiltDataset.entry.meta, or BuiltDataset.metadata for the spec's")
        return self.entry.meta

    @property
    def metadata(self) -> dict[str, Any]:
        """What the spec described of its output (``spec.metadata()``); empty if it has no such method."""
        return dict(self.entry.meta.get("metadata", {}))

    @property
    def layout(self) -> dict[str, Any]:
        """Each array's ``{"dtype": numpy descr, "shape": per-example shape}``, by name."""
        return dict(self.entry.meta["layout"])

    def __len__(self) -> int:
        return int(self.entry.meta["n_examples"])

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The concatenated arrays, read from the entry on first use."""
        if self._arrays is None:
            self._arrays = _load_arrays(self.entry)
        return self._arrays

    def take(self, indices: Any) -> dict[str, np.ndarray]:
        """Return examples ``indices`` of every array, in that order, reading one shard at a time.

        Unlike ``ds.arrays`` this never holds the whole dataset in memory (a preview
        of 16 scenes out of millions reads only what it needs).
        """
        wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= len(self)):
            raise IndexError(f"example indices must be in 0..{len(self) - 1}, got {indices!r}")
        if self._arrays is not None:
            return {name: array[wanted] for name, array in self._arrays.items()}
        rows, order = np.unique(wanted, return_inverse=True)
        return {name: array[order] for name, array in _load_arrays(self.entry, rows).items()}

    @property
    def _image_name(self) -> str:
        layout = self.entry.meta["layout"]
        return "images" if "images" in layout else next(iter(layout))

    @property
    def images(self) -> np.ndarray:
        """The ``"images"`` array (or the first array when there is none of that name)."""
        return self.arrays[self._image_name]

    @property
    def labels(self) -> dict[str, np.ndarray] | None:
        """Every array but :attr:`images`, by name (None when there is no other array)."""
        targets = {name: array for name, array in self.arrays.items() if name != self._image_name}
        return targets or None

    def __getitem__(self, index: Any) -> Any:
        """``ds[name]``: one whole array; ``ds[i]``: the example ``(image, target dict)``."""
        if isinstance(index, str):
            if index not in self.entry.meta["layout"]:
                names = ", ".join(self.entry.meta["layout"])
                raise KeyError(f"{self.entry.kind} has no array {index!r}; it has {names}")
            return self.arrays[index]
        targets = self.labels
        return self.images[index], None if targets is None else {name: array[index] for name, array in targets.items()}

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return (self[i] for i in range(len(self)))

    def batches(self, *, batch_size: int, **options: Any) -> Iterator[tuple[Any, Any]]:
        """Yield ``(images, targets dict)`` batches: :func:`glyphforge.batches` of :attr:`images` and :attr:`labels`."""
        return batches(self.images, self.labels, batch_size=batch_size, **options)

    def __repr__(self) -> str:
        arrays = list(self.entry.meta["layout"])
        return f"<BuiltDataset {self.entry.kind} {self.key[:12]}: {len(self)} examples, arrays {arrays}>"


def _load_arrays(entry: Entry, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Fill preallocated arrays shard by shard (peak memory: the result plus one shard).

    ``rows``, sorted unique example indices, keeps only those examples; None keeps all.
    """
    n_examples, layout = entry.meta["n_examples"], entry.meta["layout"]
    count = n_examples if rows is None else len(rows)
    arrays = {
        name: np.empty((count, *info["shape"]), dtype=np.lib.format.descr_to_dtype(_descr(info["dtype"])))
        for name, info in layout.items()
    }
    start = 0
    source: slice | np.ndarray
    for shard in entry.iter(ARRAYS_FILE):
        stop = start + len(next(iter(shard.values())))
        if rows is None:
            target, source = slice(start, stop), slice(None)
        else:
            first, last = np.searchsorted(rows, [start, stop])
            target, source = slice(first, last), rows[first:last] - start
        for name, array in arrays.items():
            array[target] = shard[name][source]
        start = stop
    if start != n_examples:
        raise ValueError(f"{entry.path / ARRAYS_FILE} holds {start} examples, its manifest says "
                         f"{n_examples}; remove the entry (glyphforge cache rm {entry.key[:12]}) and build again")
    return arrays


def _descr(dtype: Any) -> Any:
    """JSON turned a structured dtype's tuples into lists; make them tuples again."""
    if isinstance(dtype, list):
        return [tuple(_descr(part) for part in field) for field in dtype]
    return dtype
