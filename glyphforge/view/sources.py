"""What the viewer reads: a `Source` per entry of a data dir, read at random; built entries' here (`BuiltSource`),
prepared datasets' in :mod:`glyphforge.view.prepared`.

A `Source` answers what the page asks, reading no more than it needs:

- its rows' captions and filters come from its *label index* (`LabelIndex`): the small arrays
  only (a class per example, or a scene's ``labels``, ``n_glyphs`` and ``scene_label``), read
  once on first use and kept (a built dataset's shards are streamed through a reused buffer
  for it, each array's blocks copied out, so nothing else is kept);
- a page's images and targets come from the rows of that page only (``ds.take``), the last
  pages' rows kept in a small LRU (`RowCache`), so a page's image requests decode nothing again.

Built datasets are read through `glyphforge.BuiltDataset` with
``random_access="decode"`` (never a decoded copy: the viewer writes nothing) and two decoded
shards kept.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.lookup import find_built
from glyphforge.builds.reading.members import Scratch
from glyphforge.cache import Entry
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError

#: Decoded shards a built dataset keeps for the next page (each is one shard's rows of every array).
CACHE_SHARDS = 2
#: Rows kept after a page is read, so its image requests read nothing again: a few pages of the largest size, within
#: `KEPT_BYTES` (a page of long videos is large).
KEPT_ROWS = 256
KEPT_BYTES = 64 * 2**20
#: The arrays of a scene dataset the label index keeps (small: a few numbers per scene).
INDEX_ARRAYS = ("labels", "n_glyphs", "scene_label")


class ViewRequestError(ArgumentError, ValueError):
    """A request the viewer refuses: a bad page, class, frame or key; ``status`` is its HTTP status (4xx)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LabelIndex:
    """The small arrays that caption and filter the rows: ``labels`` (n, G) class indices (-1 pads; G = 1 for a
    dataset of one class an example), ``n_objects`` (n,) or None (not scenes), ``scene_label`` (n,) or None."""

    labels: np.ndarray
    n_objects: np.ndarray | None
    scene_label: np.ndarray | None

    def matching(self, class_index: int | None, n_objects: int | None) -> np.ndarray:
        """The example indices holding class ``class_index`` and ``n_objects`` objects (None: any), in order."""
        keep = np.ones(len(self.labels), dtype=bool)
        if class_index is not None:
            keep &= (self.labels == class_index).any(axis=1)
        if n_objects is not None:
            if self.n_objects is None:
                raise ViewRequestError("objects: only scenes have a number of objects; leave the filter out")
            keep &= self.n_objects == n_objects
        return np.flatnonzero(keep)


class RowCache:
    """The last `KEPT_ROWS` rows read (fewer beyond `KEPT_BYTES`), by example index (an LRU, safe across the server's
    threads)."""

    def __init__(self) -> None:
        self._rows: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, index: int) -> dict[str, np.ndarray] | None:
        with self._lock:
            row = self._rows.get(index)
            if row is not None:
                self._rows.move_to_end(index)
            return row

    def put(self, index: int, row: dict[str, np.ndarray]) -> None:
        with self._lock:
            if index in self._rows:
                self._rows.move_to_end(index)
                return
            self._rows[index] = row
            self._bytes += _nbytes(row)
            while len(self._rows) > 1 and (len(self._rows) > KEPT_ROWS or self._bytes > KEPT_BYTES):
                self._bytes -= _nbytes(self._rows.popitem(last=False)[1])


def _nbytes(row: dict[str, np.ndarray]) -> int:
    return sum(np.asarray(array).nbytes for array in row.values())


class Source:
    """One dataset the viewer shows: its rows by index, its label index and what describes it."""

    def __init__(self, entry: Entry, title: str) -> None:
        self.entry = entry
        self.title = title
        self._rows = RowCache()
        self._index: LabelIndex | None = None
        self._lock = threading.RLock()  # a prepared source opens its dataset while reading its label index

    # -- what subclasses give ------------------------------------------------------------
    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def classes(self) -> list[str]:
        """The class names labels index."""
        raise NotImplementedError

    def _take(self, indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        raise NotImplementedError

    def _read_index(self) -> LabelIndex:
        raise NotImplementedError

    # -- what the server asks --------------------------------------------------------------
    @property
    def is_scenes(self) -> bool:
        """Whether examples hold objects (boxes), not one class each."""
        return False

    @property
    def n_frames(self) -> int:
        """Frames per example (0: still images)."""
        return 0

    def label_index(self) -> LabelIndex:
        """The label index (`LabelIndex`), read on first use and kept."""
        with self._lock:
            if self._index is None:
                self._index = self._read_index()
            return self._index

    def rows(self, indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        """Rows ``indices`` (checked), each ``{array name: its row}``; reads only the rows not kept."""
        found = {index: self._rows.get(index) for index in indices.tolist()}
        missing = [index for index, row in found.items() if row is None]
        if missing:
            for index, row in zip(missing, self._take(np.array(missing, dtype=np.int64)), strict=True):
                self._rows.put(index, row)
                found[index] = row
        return [found[index] for index in indices.tolist()]  # type: ignore[misc]  # every one filled

    def row(self, index: int) -> dict[str, np.ndarray]:
        """Row ``index``: a `ViewRequestError` (404) outside ``0 .. len - 1``."""
        if not 0 <= index < len(self):
            raise ViewRequestError(f"example {index} is not in {self.title}: it holds examples 0 to {len(self) - 1}",
                                   404)
        return self.rows(np.array([index]))[0]

    def class_index(self, name: str | None) -> int | None:
        """The index of class ``name`` (None: no filter); a `ViewRequestError` naming the classes when unknown."""
        if name is None or name == "":
            return None
        try:
            return self.classes.index(name)
        except ValueError:
            shown = ", ".join(repr(c) for c in self.classes[:40])
            raise ViewRequestError(f"class {name!r} is not a class of {self.title}; its classes are {shown}") from None

    def info(self) -> dict[str, Any]:
        """What the manifest says of the entry: kind, key, params (the spec), size, files, when and how it was made."""
        manifest = self.entry.manifest
        made = {name: manifest[name] for name in ("created", "glyphforge_version", "version", "build")
                if name in manifest}
        return {"kind": self.entry.kind, "key": self.entry.key, "params": self.entry.params,
                "size_bytes": self.entry.size_bytes, "files": len(self.entry.files), "made": made,
                "examples": len(self), "frames": self.n_frames, "scenes": self.is_scenes}


class BuiltSource(Source):
    """A built entry, read shard by shard where it lies (`BuiltDataset`, decoding only)."""

    def __init__(self, entry: Entry, context: DataContext) -> None:
        super().__init__(entry, f"{entry.kind} {entry.key[:12]}")
        if context.remote is None:
            self.dataset = BuiltDataset(entry, cache_shards=CACHE_SHARDS, random_access="decode")
        else:
            self.dataset = find_built(f"{entry.kind}/{entry.key}", context=context, cache_shards=CACHE_SHARDS,
                                      random_access="decode")

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def classes(self) -> list[str]:
        return [str(name) for name in (self.dataset.classes or [])]

    @property
    def is_scenes(self) -> bool:
        return "boxes" in self.dataset.layout

    @property
    def n_frames(self) -> int:
        shape = self.dataset.layout[self.dataset.image_name]["shape"]
        return int(shape[0]) if len(shape) == 4 else 0

    def _take(self, indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        taken = self.dataset.take(indices)
        taken["images"] = taken.pop(self.dataset.image_name)
        return [{name: array[k] for name, array in taken.items()} for k in range(len(indices))]

    def _read_index(self) -> LabelIndex:
        """Stream every shard once through a reused buffer, copying out only the small arrays (`INDEX_ARRAYS`)."""
        layout = self.dataset.layout
        kept = {name: _index_array(name, layout[name], len(self)) for name in INDEX_ARRAYS if name in layout}
        starts = self.dataset.index.start
        scratch = Scratch()

        def put(name: str, first: int, block: np.ndarray) -> None:
            if name in kept:
                target = kept[name]
                # a video's labels are the same in every frame: frame 0's are kept
                target[start + first:start + first + len(block)] = block[:, 0] if block.ndim == 3 else block

        for number in range(len(starts)):
            start = int(starts[number])
            self.dataset.read_blocks(number, put, scratch)
        labels = kept.get("labels", np.full((len(self), 1), -1, dtype=np.int64))
        return LabelIndex(labels.reshape(len(self), -1), kept.get("n_glyphs"), kept.get("scene_label"))


def _index_array(name: str, spec: dict[str, Any], n: int) -> np.ndarray:
    """The array the label index fills for array ``name`` of per-example ``spec`` (a video's labels: frame 0's)."""
    shape = tuple(spec["shape"])
    if name == "labels" and len(shape) == 2:
        shape = shape[1:]
    return np.empty((n, *shape), dtype=np.dtype(spec["dtype"]))
