"""The viewer's prepared datasets: each page reads only the data files of its rows, from the entry it shows.

A prepared entry holds its images in a few data files: one per class (MNIST, EMNIST ...), one per alphabet (Omniglot),
one per image (backgrounds). A `FileSource` places every example in one file (`Places`: its class, its file and
where it lies in that file) from what the entry records of the files (counts in its meta, the class of every
upstream example in a per-class entry's labels file), decoding no image; a page then reads the files of its rows,
the last few kept (`DataFiles`: an LRU bounded by the largest files, not by the dataset). Each entry's page reads
that entry's own files: an own copy and upstream's entry of the same config and shape are two pages, each showing
what it holds.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from glyphforge.cache import Entry
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets import registry
from glyphforge.datasets.classes.selection import LABELS_FILE, class_records
from glyphforge.datasets.omniglot.archive import N_DRAWERS
from glyphforge.view.sources import LabelIndex, Source

#: Data files kept decoded for the next page: a few, within `KEPT_FILE_BYTES` (always the last one read).
KEPT_FILES = 3
KEPT_FILE_BYTES = 96 * 2**20
#: The prepared kinds shown that are not per-class declarations, each with its source.
OTHER_KINDS = ("omniglot", "backgrounds")


class DataFiles:
    """The data files of an entry last read, decoded (an LRU of `KEPT_FILES` within `KEPT_FILE_BYTES`), safe across
    the server's threads."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._files: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> np.ndarray:
        """The array of data file ``name``, read when not kept."""
        with self._lock:
            if name in self._files:
                self._files.move_to_end(name)
                return self._files[name]
            array = np.asarray(self.entry.load(name))
            self._files[name] = array
            while len(self._files) > 1 and (len(self._files) > KEPT_FILES or sum(
                    kept.nbytes for kept in self._files.values()) > KEPT_FILE_BYTES):
                self._files.popitem(last=False)
            return array


@dataclass(frozen=True)
class Places:
    """Where each example lies: ``labels`` (n,) its class, ``files`` (n,) the number of its file in ``names``,
    ``within`` (n, k) its index in that file's array (k = 0: the array is the image)."""

    names: list[str]
    labels: np.ndarray
    files: np.ndarray
    within: np.ndarray


class FileSource(Source):
    """A prepared entry whose examples lie in its data files, read file by file as rows are asked for."""

    def __init__(self, entry: Entry) -> None:
        super().__init__(entry, prepared_title(entry))
        self._files = DataFiles(entry)
        self._places: Places | None = None

    def _place(self) -> Places:
        """Where every example lies (see `Places`), read from the entry's records only."""
        raise NotImplementedError

    def places(self) -> Places:
        """`Places`, found on first use and kept."""
        with self._lock:
            if self._places is None:
                self._places = self._place()
            return self._places

    def __len__(self) -> int:
        return len(self.places().labels)

    def _take(self, indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        places = self.places()
        files = places.files[indices]
        rows: list[dict[str, np.ndarray]] = [{} for _ in indices]
        for number in np.unique(files).tolist():  # one data file at a time
            array = self._files.get(places.names[number])
            for k in np.flatnonzero(files == number).tolist():
                example = int(indices[k])
                # a copy: a kept row must not keep its whole file alive once the file has left `DataFiles`
                rows[k] = {"images": array[tuple(places.within[example])].copy(),
                           "label": np.asarray(places.labels[example])}
        return rows

    def _read_index(self) -> LabelIndex:
        return LabelIndex(self.places().labels[:, None], None, None)


class ClassFilesSource(FileSource):
    """A per-class entry (MNIST, EMNIST ...) in its map-style class's order, ``subset="all"``: upstream's train
    examples, then its test examples; each class file holds its class's test images, then its train ones."""

    @property
    def classes(self) -> list[str]:
        return [str(record["name"]) for record in class_records(self.entry)]

    def _place(self) -> Places:
        records = class_records(self.entry)
        labels = np.asarray(self.entry.load(LABELS_FILE), dtype=np.int64)  # the test examples', then the train ones'
        starts = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=len(records)))])
        order = np.argsort(labels, kind="stable")
        within = np.empty(len(labels), np.int64)
        within[order] = np.arange(len(labels)) - starts[labels[order]]
        n_test = int(self.entry.meta["n_test"])
        upstream = np.concatenate([np.arange(n_test, len(labels)), np.arange(n_test)])  # train, then test
        shown = labels[upstream]
        return Places([record["file"] for record in records], shown, shown, within[upstream, None].astype(np.int32))


class OmniglotSource(FileSource):
    """An Omniglot set: every drawing an example, its character (``"Latin,3"``) its class, in alphabet, character and
    drawer order; each alphabet's file holds ``(characters, drawers, H, W)``."""

    @property
    def classes(self) -> list[str]:
        return [f"{record['name']},{number + 1}" for record in self.entry.meta["alphabets"]
                for number in range(len(record["characters"]))]

    def _place(self) -> Places:
        records = self.entry.meta["alphabets"]
        drawers = N_DRAWERS
        counts = np.array([len(record["characters"]) for record in records], dtype=np.int64)
        characters = np.arange(int(counts.sum()))
        files = np.repeat(np.arange(len(records)), counts)
        first = np.concatenate([[0], np.cumsum(counts)])[files]  # each character's alphabet's first character
        within = np.stack([np.repeat(characters - first, drawers), np.tile(np.arange(drawers), len(characters))],
                          axis=1)
        return Places([record["file"] for record in records], np.repeat(characters, drawers),
                      np.repeat(files, drawers), within)


class BackgroundsSource(FileSource):
    """A backgrounds entry: every image an example, its name its class (sorted); each image is its own file."""

    @property
    def classes(self) -> list[str]:
        return sorted(self.entry.meta["backgrounds"])

    def _place(self) -> Places:
        names = self.classes
        numbers = np.arange(len(names), dtype=np.int64)
        return Places([self.entry.meta["backgrounds"][name]["file"] for name in names], numbers, numbers,
                      np.empty((len(names), 0), np.int64))


def prepared_title(entry: Entry) -> str:
    """How the page names prepared ``entry``: as ``prepare-data`` does (``"emnist byclass 28x28"``), an own copy
    noted."""
    return f"{entry.kind} {registry.entry_label(entry)}{_own_copy.note(entry.meta)}"


def is_prepared_shown(entry: Entry) -> bool:
    """Whether the viewer shows prepared ``entry``: a per-class dataset's, Omniglot's or the backgrounds'."""
    return entry.kind in registry.registered() and (registry.declaration(entry.kind) is not None
                                                     or entry.kind in OTHER_KINDS)


def prepared_source(entry: Entry) -> Source:
    """The source of prepared ``entry`` (one `is_prepared_shown` accepts)."""
    kinds: dict[str, Any] = {"omniglot": OmniglotSource, "backgrounds": BackgroundsSource}
    return kinds.get(entry.kind, ClassFilesSource)(entry)
