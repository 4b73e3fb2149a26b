"""EMNIST's splits and class names, the class files of an entry, and which images of them a load takes.

Splits and classes
------------------
A class is one character. In label order: ``byclass`` 0-9, A-Z, a-z (62 classes);
``bymerge`` and ``balanced`` 0-9, A-Z and ``abdefghnqrt`` (47: the lower-case letters
whose capitals look different); ``letters`` A-Z (26; NIST labels them 1-26, every
other split from 0); ``digits`` and ``mnist`` 0-9. Loaders label the classes they
return by their sorted characters, not by NIST's labels.

Class file names
----------------
Names are safe on case-insensitive filesystems (macOS, Windows), where ``A.pklz`` and
``a.pklz`` would be the same file: digits are ``digit_0.pklz`` ... ``digit_9.pklz``,
upper-case letters ``upper_A.pklz`` ... ``upper_Z.pklz``, lower-case letters
``lower_a.pklz`` ... ``lower_z.pklz``. The character itself is kept in the manifest
(``meta["classes"][i]["char"]``); :func:`class_file_name` maps one to the other.

Selection
---------
A load takes one contiguous block of each class file (whose first ``n_test`` images
are the test images, the rest the train images): the subset (``"all"``, ``"test"``
or ``"train"``), then of that subset's ``n`` images those ``[int(a * n), int(b * n))``
that ``example_range=(a, b)`` selects (:func:`glyphforge._checks.example_bounds`).
``balance`` cuts every block to the smallest block's size, keeping its first images;
the blank class is that many all-zero images. Class files are read on a few threads.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from glyphforge._checks import MAX_READ_THREADS, check_int, example_bounds, worker_count
from glyphforge.cache import Entry
from glyphforge.datasets._classes import BLANK, ClassNames

DIGITS = "0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
#: The class characters of each split, in label order.
CLASSES: dict[str, str] = {
    "byclass": DIGITS + UPPER + LOWER,
    "bymerge": DIGITS + UPPER + "abdefghnqrt",
    "balanced": DIGITS + UPPER + "abdefghnqrt",
    "letters": UPPER,
    "digits": DIGITS,
    "mnist": DIGITS,
}
SPLITS = tuple(CLASSES)
DEFAULT_SPLIT = "byclass"
SUBSETS = ("all", "train", "test")


class EMNISTFormatError(ValueError):
    """The archive's mapping or labels do not describe the split, or a class file is damaged."""


def first_label(split: str) -> int:
    """Return NIST's label of the first class of ``split``: 1 for ``letters``, else 0."""
    return 1 if split == "letters" else 0


# -- argument checks -------------------------------------------------------------
def check_split(split: Any) -> str:
    """Return ``split`` if it is one of :data:`SPLITS`, else raise a ValueError listing them."""
    if split not in CLASSES:
        raise ValueError(f"unknown EMNIST split {split!r}: use one of {', '.join(SPLITS)}")
    return str(split)


def check_splits(split: str | Iterable[str] | None) -> tuple[str, ...]:
    """Return the splits ``split`` names (one name, an iterable of names, None: ``byclass``), repeats dropped."""
    names = (DEFAULT_SPLIT,) if split is None else (split,) if isinstance(split, str) else tuple(dict.fromkeys(split))
    if not names:
        raise ValueError(f"split is empty: give one or more of {', '.join(SPLITS)}, or None for {DEFAULT_SPLIT}")
    return tuple(check_split(name) for name in names)


def check_subset(subset: Any) -> str:
    """Return ``subset`` if it is one of :data:`SUBSETS`, else raise a ValueError listing them."""
    if subset not in SUBSETS:
        raise ValueError(f"subset {subset!r} is invalid: use one of {', '.join(SUBSETS)}")
    return str(subset)


def check_classes(classes: Iterable[str | int] | None, split: str) -> list[str]:
    """Return the sorted distinct class characters of ``classes`` (None: all of ``split``), or raise."""
    known = CLASSES[split]
    if classes is None:
        return sorted(known)
    names = [str(item) for item in classes]
    unknown = sorted({name for name in names if len(name) != 1 or name not in known})
    if unknown:
        raise ValueError(f"unknown EMNIST {split} classes {unknown}: this split has the classes {known!r}")
    if not names:
        raise ValueError("classes is empty: give at least one class, e.g. '0123456789', or None for all")
    return sorted(set(names))


# -- class files ---------------------------------------------------------------------
def class_file_name(char: str) -> str:
    """Return the entry file name of class ``char``: ``digit_0``, ``upper_A``, ``lower_a`` + ``.pklz``."""
    for prefix, alphabet in (("digit", DIGITS), ("upper", UPPER), ("lower", LOWER)):
        if len(char) == 1 and char in alphabet:
            return f"{prefix}_{char}.pklz"
    raise ValueError(f"{char!r} is not an EMNIST class: classes are single characters 0-9, A-Z or a-z")


def load_class(entry: Entry, name: str) -> np.ndarray:
    """Load the class file ``name`` of ``entry``.

    Raises
    ------
    MissingEntryFileError, DamagedEntryFileError
        When the file is missing or not the size its manifest records (see `glyphforge.cache.Entry.file`).
    """
    images: np.ndarray = entry.load(name)
    return images


# -- selection -------------------------------------------------------------------------
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
        """Return every selected image, block by block in file order, and its block index (int64)."""
        sizes = self.sizes
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        x = self._empty(self.total)
        self._fill(x, [np.arange(bounds[i], bounds[i + 1]) for i in range(len(self.blocks))])
        return x, np.repeat(np.arange(len(self.blocks), dtype=np.int64), sizes)

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
            images = load_class(self.entry, block.file)[block.start:block.stop]
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
    key: str = "char",
) -> Selection:
    """Decide which images of the classes ``names`` (sorted, all in ``entry``) a load takes.

    No class file is read. The rule is the module docstring's; the blank block, when
    ``include_blank``, comes last. ``key`` is the field of ``entry.meta["classes"]``'s
    records that holds the class name (``"char"`` for EMNIST; any entry whose class
    records also have ``file``, ``n_test`` and ``n_train`` may be selected from).
    Selecting no image at all raises ValueError.
    """
    records = {record[key]: record for record in entry.meta["classes"]}
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


def preview_selection(
    entry: Entry, n: int, rng: np.random.Generator, key: str = "char"
) -> tuple[np.ndarray, list[str]]:
    """Return ``n`` images of ``entry`` and their class names (a dataset's ``preview_examples``).

    ``rng`` picks up to ``n`` distinct classes, then ``n`` of their images (test and
    train; fewer if they hold fewer). Only those classes' files are read. ``key`` as in
    `select`.
    """
    names = [record[key] for record in entry.meta["classes"]]
    chosen = sorted(rng.choice(names, size=min(n, len(names)), replace=False).tolist())
    seed = int(rng.integers(2**32))
    selection = select(entry, chosen, "all", None, balance=False, include_blank=False, key=key)
    x, y = selection.shuffled(min(n, selection.total), seed)
    return x, [chosen[label] for label in y]
