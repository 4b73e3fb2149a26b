"""Which images of a per-class entry a load takes, and reading just those.

A per-class entry (see `glyphforge.datasets.classes.files`) holds one uint8 file per class,
that class's test images first, then its train images, and :data:`LABELS_FILE`: the class
index of every upstream test example, then of every train example, in upstream order.

Selection
---------
A load takes one contiguous block of each class file: the subset (``"all"``, ``"test"``
or ``"train"``), then of that subset's ``n`` images those ``[int(a * n), int(b * n))``
that ``example_range=(a, b)`` selects (:func:`glyphforge._checks.example_bounds`).
``balance`` cuts every block to the smallest block's size, keeping its first images;
the blank class is that many all-zero images. Only the selected classes' files are read,
on a few threads.

Order
-----
The map-style datasets take the selected images in upstream order (:meth:`Selection.in_order`):
index ``i`` of subset ``"train"`` or ``"test"`` is upstream's example ``i`` of that subset (when
every image is selected), subset ``"all"`` is the train examples then the test examples, and
blank images come last. Loads shuffle the images listed block by block
(:meth:`Selection.shuffled`).
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from glyphforge._checks import MAX_READ_THREADS, check_int, example_bounds, worker_count
from glyphforge.cache import Entry
from glyphforge.datasets.class_names import BLANK, ClassNames

#: The file of a per-class entry holding the class index of every upstream example: the test examples', then the
#: train examples', each in upstream order (see the module docstring).
LABELS_FILE = "upstream_labels.pklz"

def class_records(entry: Entry) -> list[dict[str, Any]]:
    """Return the class records of ``entry`` in label order, ``{"name", "label", "file", "n_test", "n_train"}``."""
    return list(entry.meta["classes"])



@dataclasses.dataclass(frozen=True)
class Block:
    """The images of one class that a load takes: ``file[start:stop]`` (file None: blank images)."""

    file: str | None
    start: int
    stop: int

    @property
    def size(self) -> int:
        """How many images the block holds."""
        return self.stop - self.start


@dataclasses.dataclass(frozen=True)
class Selection:
    """The blocks a load takes from an entry, one per class in label order (see the module docstring).

    ``classes`` names the blocks (the labels' names); ``request`` says what was asked for,
    for messages.
    """

    entry: Entry
    blocks: tuple[Block, ...]
    classes: ClassNames
    request: str

    @property
    def sizes(self) -> np.ndarray:
        """The number of images of each block."""
        return np.array([block.size for block in self.blocks], dtype=np.int64)

    @property
    def total(self) -> int:
        """The number of images selected."""
        return int(self.sizes.sum())

    def in_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Return every selected image in upstream order (see the module docstring) and its block index (int64)."""
        sizes = self.sizes
        positions = np.concatenate(self._upstream_positions())
        rank = np.empty(len(positions), np.int64)
        rank[np.argsort(positions, kind="stable")] = np.arange(len(positions))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        x = self._empty(self.total)
        self._fill(x, [rank[bounds[i]:bounds[i + 1]] for i in range(len(self.blocks))])
        y = np.empty(self.total, np.int64)
        y[rank] = np.repeat(np.arange(len(self.blocks), dtype=np.int64), sizes)
        return x, y

    def _upstream_positions(self) -> list[np.ndarray]:
        """Each block's images' places in upstream order: train example ``j`` at ``j``, test example ``j`` at
        ``n_train + j``, blank images after all of them."""
        n_test, n_train = self.entry.meta["n_test"], self.entry.meta["n_train"]
        records = class_records(self.entry)
        labels = self.entry.load(LABELS_FILE)  # test examples' classes, then train examples'
        order = np.argsort(labels, kind="stable")  # per class: its test examples, then its train ones (its file)
        starts = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=len(records)))])
        place = np.where(order < n_test, order + n_train, order - n_test)
        index = {record["file"]: label for label, record in enumerate(records)}
        found = []
        for block in self.blocks:
            if block.file is None:
                found.append(n_test + n_train + np.arange(block.size))
            else:
                start = starts[index[block.file]]
                found.append(place[start + block.start:start + block.stop])
        return found

    def shuffled(self, n_examples: int | None, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Return the images in the order ``numpy.random.default_rng(seed).permutation``, cut to ``n_examples``.

        The images listed block by block are permuted, then the first ``n_examples``
        (None: all) kept; only the kept images are copied. The labels are block indices.

        Raises
        ------
        ValueError
            ``n_examples`` is not a non-negative integer, or more than the images
            selected (the message says which, from ``request``).
        """
        sizes, total = self.sizes, self.total
        kept = total if n_examples is None else check_int("n_examples", n_examples, 0)
        if kept > total:
            raise ValueError(f"n_examples={kept} is more than the {total} images selected ({self.request}); "
                             f"ask for at most {total}")
        permutation = np.random.default_rng(seed).permutation(total)
        position = np.empty(total, np.int64)
        position[permutation] = np.arange(total)  # where each image of the block-ordered list lands
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        x = self._empty(kept)
        self._fill(x, [position[bounds[i]:bounds[i + 1]] for i in range(len(self.blocks))])
        y = np.repeat(np.arange(len(self.blocks), dtype=np.int64), sizes)[permutation[:kept]]
        return x, y

    def _empty(self, n: int) -> np.ndarray:
        return np.empty((n, *self.entry.meta["shape"]), np.uint8)

    def _fill(self, out: np.ndarray, destinations: list[np.ndarray]) -> None:
        """Read each block into ``out``: image ``j`` of block ``i`` to ``out[destinations[i][j]]``.

        Images whose destination is beyond ``out`` are dropped; each class file is read
        once, on a few threads.
        """

        def fill(index: int) -> None:
            block, where = self.blocks[index], destinations[index]
            keep = where < len(out)
            if block.file is None:
                out[where[keep]] = 0
                return
            images = self.entry.load(block.file)[block.start:block.stop]
            if keep.all():
                out[where] = images
            else:
                out[where[keep]] = images[keep]

        with ThreadPoolExecutor(worker_count(None, cap=MAX_READ_THREADS)) as pool:
            list(pool.map(fill, range(len(self.blocks))))


def select(
    entry: Entry,
    names: list[str],
    subset: str,
    example_range: tuple[float, float] | None,
    balance: bool,
    include_blank: bool,
) -> Selection:
    """Decide which images of the classes ``names`` (all in ``entry``; the labels' order) a load takes.

    No class file is read. The rule is the module docstring's; the blank block, when
    ``include_blank``, comes last. Selecting no image at all raises ValueError.
    """
    records = {record["name"]: record for record in class_records(entry)}
    blocks = []
    for name in names:
        record = records[name]
        n_test, n_all = record["n_test"], record["n_test"] + record["n_train"]
        start, stop = {"all": (0, n_all), "test": (0, n_test), "train": (n_test, n_all)}[subset]
        low, high = example_bounds(stop - start, example_range)
        blocks.append(Block(record["file"], start + low, start + high))
    request = f"{len(names)} classes, subset {subset!r}, example_range {example_range}"
    if not any(block.size for block in blocks):
        n_test, n_train = (sum(records[name][held] for name in names) for held in ("n_test", "n_train"))
        raise ValueError(
            f"no images selected: {request} take none of the images of cache entry {entry.kind} {entry.key[:12]} "
            f"(those classes hold {n_train:,} train and {n_test:,} test images there). Choose another subset, a "
            "wider example_range or other classes"
        )
    smallest = min(block.size for block in blocks)
    if balance:
        blocks = [Block(block.file, block.start, block.start + smallest) for block in blocks]
    if include_blank:
        blocks.append(Block(None, 0, smallest))
    return Selection(entry, tuple(blocks), ClassNames(names + [BLANK] * include_blank), request)
