"""EMNIST: fetch NIST's ``gzip.zip``, validate it, convert it to per-class pickles, load it.

All six splits (``byclass``, ``bymerge``, ``balanced``, ``letters``, ``digits``,
``mnist``) are read from the one upstream archive, member by member, without
extracting it. :func:`prepare_emnist` makes cache entries; :func:`load_emnist` and
:class:`EMNIST` read them (preparing them first when they are missing).

Cache entries
-------------
One entry of kind ``"emnist"`` per ``(split, shape)``; ``shape=(28, 28)`` is converted
from the archive, any other shape is the box resize (Pillow's ``BOX``, exactly) of every
image of the 28x28 entry. An entry holds one ``.pklz`` per class: the uint8 array
``(n_images_of_class, H, W)``, upright, white strokes on black, with that class's
*test* images first and then its *train* images, each in file order (the order of the
old conversion script). ``entry.meta`` holds ``split``, ``shape``, ``n_images``,
``n_train``, ``n_test`` and ``classes``: one record per class in label order,
``{"char", "label", "file", "n_test", "n_train"}``; the first ``n_test`` images of a
class file are its test images (the train/test boundary).

Class file names
----------------
Names are safe on case-insensitive filesystems (macOS, Windows), where ``A.pklz`` and
``a.pklz`` would be the same file: digits are ``digit_0.pklz`` ... ``digit_9.pklz``,
upper-case letters ``upper_A.pklz`` ... ``upper_Z.pklz``, lower-case letters
``lower_a.pklz`` ... ``lower_z.pklz``. The character itself is kept in the manifest
(``meta["classes"][i]["char"]``); :func:`class_file_name` maps one to the other.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from glyphforge.batching import MapStyleDataset
from glyphforge.cache import CacheStore, Entry, Writer
from glyphforge.datasets._prepare import PathLike, check_shape, upstream_file
from glyphforge.pipelines.archive import open_member, read_member
from glyphforge.pipelines.download import Resource
from glyphforge.pipelines.idx import read_images, read_labels


#: The upstream archive (size and md5 as pinned by torchvision).
EMNIST_ZIP = Resource(
    dataset="emnist",
    filename="gzip.zip",
    url="https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip",
    hash="md5:58c8d27c78d21e728a6bc7b3cc06412e",
    size=561_753_746,
)
KIND = "emnist"
SPLITS = ("byclass", "bymerge", "balanced", "letters", "digits", "mnist")
SUBSETS = ("all", "train", "test")
NATIVE_SHAPE = (28, 28)
RESIZE_METHOD = "box"
BLANK = " "

_DIGITS = "0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_CLASSES: dict[str, str] = {
    "byclass": _DIGITS + _UPPER + _LOWER,
    "bymerge": _DIGITS + _UPPER + "abdefghnqrt",
    "balanced": _DIGITS + _UPPER + "abdefghnqrt",
    "letters": _UPPER,
    "digits": _DIGITS,
    "mnist": _DIGITS,
}
_FIRST_LABEL = {"letters": 1}
_WORKERS = max(1, min(4, os.cpu_count() or 1))


class EMNISTFormatError(ValueError):
    """The archive's mapping or labels do not describe the split, or a class file is damaged."""


# -- names -------------------------------------------------------------------
def emnist_classes(split: str = "byclass") -> list[str]:
    """Return the class characters of ``split`` in label order (no download needed).

    ``byclass``: 0-9, A-Z, a-z (62); ``bymerge`` and ``balanced``: 0-9, A-Z and
    ``abdefghnqrt`` (47); ``letters``: A-Z (labels 1-26); ``digits`` and ``mnist``: 0-9.
    """
    return list(_CLASSES[_check_split(split)])


def class_file_name(char: str) -> str:
    """Return the entry file name of class ``char``: ``digit_0``, ``upper_A``, ``lower_a`` + ``.pklz``."""
    for prefix, alphabet in (("digit", _DIGITS), ("upper", _UPPER), ("lower", _LOWER)):
        if len(char) == 1 and char in alphabet:
            return f"{prefix}_{char}.pklz"
    raise ValueError(f"{char!r} is not an EMNIST class: classes are single characters 0-9, A-Z or a-z")


def member_name(split: str, part: str) -> str:
    """Return the archive member of ``split``: ``part`` is e.g. ``"train-images"`` or ``"mapping"``."""
    if part == "mapping":
        return f"gzip/emnist-{split}-mapping.txt"
    subset, kind = part.split("-")
    return f"gzip/emnist-{split}-{subset}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"


def parse_mapping(text: str, name: str) -> dict[int, str]:
    """Parse a mapping file's ``label ascii_code [more codes]`` lines into ``{label: char}``.

    The class is the character of the first code; further columns are ignored, blank
    lines skipped. ``name`` is quoted in errors.

    Raises
    ------
    EMNISTFormatError
        For a line that is not at least two integers, or a repeated label.
    """
    mapping: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            label, code = int(fields[0]), int(fields[1])
            char = chr(code)
        except (ValueError, IndexError, OverflowError):
            raise EMNISTFormatError(
                f"{name} line {number} is {line!r}: expected 'label ascii_code [more codes]' "
                "(integers separated by spaces); the file is corrupt"
            ) from None
        if label in mapping:
            raise EMNISTFormatError(f"{name} line {number} repeats label {label}; the file is corrupt")
        mapping[label] = char
    return mapping


# -- argument checks -----------------------------------------------------------
def _check_split(split: str) -> str:
    if split not in _CLASSES:
        raise ValueError(f"unknown EMNIST split {split!r}: use one of {', '.join(SPLITS)}")
    return split


def _check_classes(classes: Iterable[str | int] | None, split: str) -> list[str]:
    known = _CLASSES[split]
    if classes is None:
        return sorted(known)
    names = [str(item) for item in classes]
    unknown = sorted({name for name in names if len(name) != 1 or name not in known})
    if unknown:
        raise ValueError(f"unknown EMNIST {split} classes {unknown}: this split has the classes {known!r}")
    if not names:
        raise ValueError("classes is empty: give at least one class, e.g. '0123456789', or None for all")
    return sorted(set(names))


def _check_example_range(example_range: tuple[float, float] | None) -> tuple[float, float] | None:
    if example_range is None:
        return None
    try:
        low, high = (float(bound) for bound in example_range)
    except (TypeError, ValueError):
        low, high = 1.0, 0.0
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(
            f"example_range {example_range!r} is invalid: give (a, b) with 0 <= a < b <= 1, e.g. (0.0, 0.9)"
        )
    return low, high


# -- prepare -------------------------------------------------------------------
def _params(split: str, shape: tuple[int, int]) -> dict[str, Any]:
    params: dict[str, Any] = {"split": split, "shape": list(shape), "source": EMNIST_ZIP.hash}
    if shape != NATIVE_SHAPE:
        params["resize"] = RESIZE_METHOD
    return params


def prepare_emnist(
    *,
    split: str = "byclass",
    shapes: Iterable[tuple[int, int]] = (),
    data_dir: PathLike | None = None,
    mirrors: Sequence[str] | None = None,
    archive: PathLike | None = None,
    verify: bool = True,
    progress: bool = True,
) -> list[Entry]:
    """Fetch, validate and convert one EMNIST split, and make resized variants.

    Idempotent: entries already in the cache are returned without touching the
    archive or the network.

    Parameters
    ----------
    split
        One of :data:`SPLITS`.
    shapes
        Extra ``(height, width)`` variants, each the box resize of the 28x28 entry.
    data_dir
        The data dir (see :mod:`glyphforge.config`).
    mirrors
        Mirror bases tried before the origin (see :func:`glyphforge.pipelines.download.fetch`).
    archive
        A local ``gzip.zip`` to convert instead of fetching one (used in place, not copied).
    verify
        Check the archive's md5 against NIST's. False (for custom or test archives)
        skips that check for ``archive`` and for a ``gzip.zip`` already in
        ``<data dir>/raw/emnist/``; a download is always verified. The archive's
        structure (members, IDX headers and sizes, mapping, labels) is always validated.
    progress
        Show progress bars.

    Returns
    -------
    list of Entry
        The 28x28 entry, then one entry per distinct requested shape.

    Raises
    ------
    HashMismatchError
        When ``verify`` and the archive's md5 is not NIST's (nothing is cached).
    IDXError, EMNISTFormatError, ArchiveError
        When the archive is truncated or corrupt (nothing is cached).
    """
    _check_split(split)
    wanted = [shape for shape in dict.fromkeys(check_shape(shape) for shape in shapes) if shape != NATIVE_SHAPE]
    store = CacheStore.for_data_dir(data_dir)
    base = store.get(KIND, _params(split, NATIVE_SHAPE))
    if base is None:
        zip_path, verified = upstream_file(
            EMNIST_ZIP, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress, given=archive
        )
        base = _convert(store, split, zip_path, verified, progress)
    variants = [
        store.get_or_create(
            KIND, _params(split, shape), lambda writer, shape=shape: _write_resized(writer, base, shape, progress)
        )
        for shape in wanted
    ]
    return [base, *variants]


def _convert(store: CacheStore, split: str, zip_path: Path, verified: bool, progress: bool) -> Entry:
    """Read ``split`` from the archive (validating everything) and write its 28x28 entry."""
    parsed = _read_split(zip_path, split, progress)  # before the cache is touched: errors leave no trace
    return store.get_or_create(
        KIND, _params(split, NATIVE_SHAPE), lambda writer: _write_native(writer, parsed, verified, progress)
    )


@dataclasses.dataclass(frozen=True)
class _Subset:
    images: np.ndarray  # (n, 28, 28) as stored: transposed
    labels: np.ndarray  # class index 0..n_classes-1 of every image

    def class_order(self, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        """Image indices grouped by class (file order kept), and where each class starts."""
        order = np.argsort(self.labels, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(self.labels, minlength=n_classes))])
        return order, starts


@dataclasses.dataclass(frozen=True)
class _Split:
    name: str
    classes: str
    first_label: int
    test: _Subset
    train: _Subset


def _read_split(zip_path: Path, split: str, progress: bool) -> _Split:
    """Read and validate the mapping and the four IDX members of ``split`` (test and train in parallel)."""
    classes, first = _read_mapping(zip_path, split), _FIRST_LABEL.get(split, 0)
    with tqdm(total=4, desc=f"EMNIST {split}: reading {zip_path.name}", unit="file", disable=not progress) as bar, \
            ThreadPoolExecutor(2) as pool:
        test, train = pool.map(lambda part: _read_subset(zip_path, split, part, len(classes), bar), ("test", "train"))
    return _Split(split, classes, first, test, train)


def _read_subset(zip_path: Path, split: str, subset: str, n_classes: int, bar: tqdm) -> _Subset:
    """Read one subset's labels and images, checking they agree with each other and the mapping."""
    first = _FIRST_LABEL.get(split, 0)
    images_name, labels_name = member_name(split, f"{subset}-images"), member_name(split, f"{subset}-labels")
    with open_member(zip_path, labels_name) as stream:
        labels = read_labels(stream, f"{labels_name} in {zip_path}")
    bar.update()
    outside = np.unique(labels[(labels < first) | (labels >= first + n_classes)])
    if outside.size:
        raise EMNISTFormatError(
            f"{zip_path}: {labels_name} holds labels {outside.tolist()} that {member_name(split, 'mapping')} "
            f"does not define (labels {first}-{first + n_classes - 1}); the archive is corrupt"
        )
    with open_member(zip_path, images_name) as stream:
        images = read_images(stream, f"{images_name} in {zip_path}", dims=NATIVE_SHAPE)
    bar.update()
    if len(images) != len(labels):
        raise EMNISTFormatError(
            f"{zip_path}: {images_name} holds {len(images):,} images but {labels_name} holds "
            f"{len(labels):,} labels; the archive is corrupt"
        )
    return _Subset(images, labels.astype(np.intp) - first)


def _read_mapping(zip_path: Path, split: str) -> str:
    """Return the split's classes in label order from its mapping file, checked against EMNIST's."""
    name = member_name(split, "mapping")
    mapping = parse_mapping(read_member(zip_path, name).decode("ascii", errors="replace"), f"{name} in {zip_path}")
    first, expected = _FIRST_LABEL.get(split, 0), _CLASSES[split]
    found = "".join(mapping[label] for label in sorted(mapping))
    if sorted(mapping) != list(range(first, first + len(expected))) or found != expected:
        raise EMNISTFormatError(
            f"{name} in {zip_path} maps labels {min(mapping, default=None)}-{max(mapping, default=None)} to "
            f"{found!r}, but EMNIST {split} has labels {first}-{first + len(expected) - 1} for {expected!r}; "
            "the archive is corrupt or not EMNIST"
        )
    return found


def _write_native(writer: Writer, split: _Split, verified: bool, progress: bool) -> None:
    """Write one upright class file per class, test images first, then train."""
    n_classes = len(split.classes)
    (test_order, test_starts), (train_order, train_starts) = (
        split.test.class_order(n_classes), split.train.class_order(n_classes)
    )

    def write_class(index: int) -> int:
        test_index = test_order[test_starts[index]:test_starts[index + 1]]
        train_index = train_order[train_starts[index]:train_starts[index + 1]]
        images = np.empty((len(test_index) + len(train_index), *NATIVE_SHAPE), np.uint8)
        images[:len(test_index)] = split.test.images[test_index].transpose(0, 2, 1)
        images[len(test_index):] = split.train.images[train_index].transpose(0, 2, 1)
        writer.write(class_file_name(split.classes[index]), images)
        return len(images)

    n_images = len(split.test.labels) + len(split.train.labels)
    _run_per_class(write_class, n_classes, n_images, f"EMNIST {split.name}: writing 28x28", progress)
    writer.meta.update(
        split=split.name,
        shape=list(NATIVE_SHAPE),
        n_images=n_images,
        n_train=len(split.train.labels),
        n_test=len(split.test.labels),
        verified_archive=verified,
        classes=[
            {
                "char": char,
                "label": split.first_label + index,
                "file": class_file_name(char),
                "n_test": int(test_starts[index + 1] - test_starts[index]),
                "n_train": int(train_starts[index + 1] - train_starts[index]),
            }
            for index, char in enumerate(split.classes)
        ],
    )


def _write_resized(writer: Writer, base: Entry, shape: tuple[int, int], progress: bool) -> None:
    """Write the box resize of every image of every class file of ``base``.

    Worker threads load, resize and write classes; one resize runs at a time, on one
    numba thread (not every threading layer allows concurrent launches), so the other
    cores decompress and compress meanwhile.
    """
    import numba

    from glyphforge.pipelines.resize import resize  # numba kernels: imported only when resizing

    kernel_lock = threading.Lock()
    records = base.meta["classes"]

    def resize_class(index: int) -> int:
        name = records[index]["file"]
        images = _load_class(base, name)
        numba.set_num_threads(1)  # for this worker thread only
        with kernel_lock:
            small = resize(images, shape, method=RESIZE_METHOD, batch=True)
        writer.write(name, small)
        return len(small)

    label = f"EMNIST {base.meta['split']}: writing {shape[0]}x{shape[1]}"
    _run_per_class(resize_class, len(records), base.meta["n_images"], label, progress)
    writer.meta.update({**base.meta, "shape": list(shape), "resized_from": base.key, "resize": RESIZE_METHOD})


def _load_class(entry: Entry, name: str) -> np.ndarray:
    """Load one class file, first checking it is as long as the manifest says."""
    path, expected = entry.file(name), entry.manifest["files"][name]["size"]
    actual = path.stat().st_size if path.is_file() else None
    if actual != expected:
        found = "missing" if actual is None else f"{actual:,} bytes"
        raise EMNISTFormatError(
            f"{path} is damaged ({found}, its entry's manifest says {expected:,} bytes): remove the entry with "
            f"`glyphforge cache rm {entry.key[:12]}` (or `glyphforge cache gc`) and prepare EMNIST again"
        )
    return entry.load(name)


def _run_per_class(task: Callable[[int], int], n_classes: int, n_images: int, label: str, progress: bool) -> None:
    """Run ``task(class_index) -> n_images_done`` for every class on a few threads, with a bar."""
    bar = tqdm(total=n_images, desc=label, unit="img", disable=not progress)
    with ThreadPoolExecutor(_WORKERS) as pool, bar:
        for done in pool.map(task, range(n_classes)):
            bar.update(done)


# -- load ----------------------------------------------------------------------
def _entry(
    split: str, shape: tuple[int, int], data_dir: PathLike | None, download: bool, mirrors: Sequence[str] | None
) -> Entry:
    """Return the entry of ``(split, shape)``, preparing it when allowed."""
    store = CacheStore.for_data_dir(data_dir)
    entry = store.get(KIND, _params(split, shape))
    if entry is not None:
        return entry
    if not download and store.get(KIND, _params(split, NATIVE_SHAPE)) is None:
        raise FileNotFoundError(
            f"EMNIST {split} is not prepared in {store.root}: run prepare_emnist(split={split!r}) or "
            f"`prepare-data emnist --split {split}`, or pass download=True"
        )
    return prepare_emnist(split=split, shapes=[shape], data_dir=data_dir, mirrors=mirrors)[-1]


@dataclasses.dataclass(frozen=True)
class _Block:
    """The images of one class that a load takes: ``file[start:stop]`` (file None: blank)."""

    file: str | None
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


def _check_subset(subset: str) -> str:
    if subset not in SUBSETS:
        raise ValueError(f"subset {subset!r} is invalid: use one of {', '.join(SUBSETS)}")
    return subset


def _select(
    entry: Entry,
    names: list[str],
    subset: str,
    example_range: tuple[float, float] | None,
    balance: bool,
    include_blank: bool,
) -> list[_Block]:
    """Decide which images of each class to take (without reading any class file)."""
    records = {record["char"]: record for record in entry.meta["classes"]}
    blocks = []
    for name in names:
        record = records[name]
        n_test, n_all = record["n_test"], record["n_test"] + record["n_train"]
        start, stop = {"all": (0, n_all), "test": (0, n_test), "train": (n_test, n_all)}[subset]
        if example_range is not None:
            count = stop - start
            start, stop = start + int(example_range[0] * count), start + int(example_range[1] * count)
        blocks.append(_Block(record["file"], start, stop))
    smallest = min(block.size for block in blocks)
    if balance:
        blocks = [_Block(block.file, block.start, block.start + smallest) for block in blocks]
    if include_blank:
        blocks.append(_Block(None, 0, smallest))
    return blocks


def _fill_blocks(entry: Entry, blocks: list[_Block], out: np.ndarray, destinations: list[np.ndarray]) -> None:
    """Read each block's class file (on a few threads) into ``out``.

    Image ``j`` of block ``i`` goes to ``out[destinations[i][j]]``; images whose
    destination is beyond ``out`` are dropped.
    """

    def fill(index: int) -> None:
        block, where = blocks[index], destinations[index]
        keep = where < len(out)
        images = np.zeros(1, np.uint8) if block.file is None else _load_class(entry, block.file)[block.start:block.stop]
        if keep.all():
            out[where] = images
        else:
            out[where[keep]] = images if block.file is None else images[keep]

    with ThreadPoolExecutor(_WORKERS) as pool:
        list(pool.map(fill, range(len(blocks))))


def load_emnist(
    classes: Iterable[str | int] | None,
    *,
    split: str = "byclass",
    subset: str = "all",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    data_dir: PathLike | None = None,
    download: bool = True,
    mirrors: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Load EMNIST images of some classes, shuffled, reading only those classes' files.

    Parameters
    ----------
    classes
        Characters (a string such as ``"0123456789"`` works; digits may be ints), or
        None for every class of the split. They are de-duplicated and sorted.
    split
        One of :data:`SPLITS`.
    subset
        ``"all"`` (test and train), ``"train"`` or ``"test"``.
    balance
        Truncate every class to the smallest class's count (keeping its first images).
    include_blank
        Add the class ``' '`` (last in the class list) of all-zero images, as many as
        the smallest class has.
    shape
        ``(height, width)``; None for 28x28. Other shapes use the box-resized entry,
        made from the 28x28 entry when missing.
    n_examples
        Keep only the first ``n_examples`` images after shuffling.
    example_range
        ``(a, b)``: take images ``[int(a * n), int(b * n))`` of each class's ``n``
        images in the subset, so adjacent ranges such as ``(0, 0.9)`` and
        ``(0.9, 1)`` partition a class exactly.
    seed
        Seeds ``numpy.random.default_rng`` whose ``permutation`` shuffles the images
        (same seed, same order; None: fresh entropy).
    data_dir, mirrors
        As in :func:`prepare_emnist`.
    download
        Prepare the split (fetching the archive) when it is not in the cache.

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n, H, W)``, white strokes on black.
    y : numpy.ndarray
        int64 ``(n,)``: indices into ``classes``.
    classes : list of str
        The sorted class characters (then ``' '`` with ``include_blank``).
    """
    _check_split(split)
    _check_subset(subset)
    names = _check_classes(classes, split)
    shape = NATIVE_SHAPE if shape is None else check_shape(shape)
    example_range = _check_example_range(example_range)
    if n_examples is not None and (not isinstance(n_examples, (int, np.integer)) or n_examples < 0):
        raise ValueError(f"n_examples {n_examples!r} is invalid: give a non-negative integer or None")
    entry = _entry(split, shape, data_dir, download, mirrors)
    blocks = _select(entry, names, subset, example_range, balance, include_blank)
    sizes = np.array([block.size for block in blocks])
    total = int(sizes.sum())
    if n_examples is not None and n_examples > total:
        raise ValueError(
            f"n_examples={n_examples} is more than the {total} images selected "
            f"({len(names)} classes, subset {subset!r}, example_range {example_range}); ask for at most {total}"
        )
    kept = total if n_examples is None else int(n_examples)
    permutation = np.random.default_rng(seed).permutation(total)
    position = np.empty(total, np.int64)
    position[permutation] = np.arange(total)  # where each image of the class-ordered list lands
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    x = np.empty((kept, *shape), np.uint8)
    _fill_blocks(entry, blocks, x, [position[bounds[i]:bounds[i + 1]] for i in range(len(blocks))])
    y = np.repeat(np.arange(len(blocks), dtype=np.int64), sizes)[permutation[:kept]]
    return x, y, names + [BLANK] * include_blank


class EMNIST(MapStyleDataset):
    """One EMNIST split as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``.

    Images are in a fixed order (classes in sorted order, each class's images in its
    file order), so a PyTorch ``DataLoader`` (which shuffles) or :meth:`batches` takes
    it as is. ``images`` is uint8 ``(n, H, W)``; ``labels`` int64 indices into
    ``classes``.

    Parameters
    ----------
    split, subset, shape, classes, balance, include_blank, example_range, data_dir, download, mirrors
        As in :func:`load_emnist`.
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    """

    def __init__(
        self,
        split: str = "byclass",
        subset: str = "train",
        shape: tuple[int, int] | None = None,
        *,
        classes: Iterable[str | int] | None = None,
        balance: bool = False,
        include_blank: bool = False,
        example_range: tuple[float, float] | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        data_dir: PathLike | None = None,
        download: bool = True,
        mirrors: Sequence[str] | None = None,
    ) -> None:
        _check_split(split)
        names = _check_classes(classes, split)
        self.split, self.subset = split, _check_subset(subset)
        self.shape = NATIVE_SHAPE if shape is None else check_shape(shape)
        entry = _entry(split, self.shape, data_dir, download, mirrors)
        blocks = _select(entry, names, subset, _check_example_range(example_range), balance, include_blank)
        sizes = np.array([block.size for block in blocks])
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        self.images = np.empty((int(bounds[-1]), *self.shape), np.uint8)
        _fill_blocks(entry, blocks, self.images, [np.arange(bounds[i], bounds[i + 1]) for i in range(len(blocks))])
        self.labels = np.repeat(np.arange(len(blocks), dtype=np.int64), sizes)
        self.classes = names + [BLANK] * include_blank
        self.transform = transform

    def __getitem__(self, index: Any) -> tuple[Any, Any]:
        image, label = super().__getitem__(index)
        return (image if self.transform is None else self.transform(image)), label

    def __repr__(self) -> str:
        return (
            f"EMNIST(split={self.split!r}, subset={self.subset!r}, shape={self.shape}, "
            f"{len(self)} images, {len(self.classes)} classes)"
        )
