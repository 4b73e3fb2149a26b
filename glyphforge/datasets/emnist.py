"""EMNIST: fetch NIST's ``gzip.zip``, validate it, convert it to per-class pickles, load it.

All six splits (:data:`SPLITS`: ``byclass``, ``bymerge``, ``balanced``, ``letters``,
``digits``, ``mnist``) are read from the one upstream archive, member by member, without
extracting it (its layout and checks: :mod:`glyphforge.datasets._emnist_archive`).
:func:`prepare_emnist` makes cache entries; :func:`load_emnist` and :class:`EMNIST`
read them (preparing them first when they are missing); :func:`preview_examples` and
:func:`glyph_images` (the registry's preview and glyph parts) read them and never
prepare anything. The classes of each split, the class file names and which images a
load takes are described in :mod:`glyphforge.datasets._emnist_catalog`.

Cache entries
-------------
One entry of kind ``"emnist"`` per ``(split, shape)``, with the params ``{"split",
"shape", "source"}`` (``source``: the pinned hash of :data:`EMNIST_ZIP`) and, for any
shape but 28x28, ``"resize": "box"``. ``shape=(28, 28)`` is converted from the
archive, any other shape is the box resize (Pillow's ``BOX``, exactly) of every image
of the 28x28 entry. An entry holds one ``.pklz`` per class: the uint8 array
``(n_images_of_class, H, W)``, upright, white strokes on black, with that class's
*test* images first and then its *train* images, each in file order (the order of the
old conversion script). ``entry.meta`` holds ``split``, ``shape``, ``n_images``,
``n_train``, ``n_test``, ``verified_archive`` and ``classes``: one record per class in
label order, ``{"char", "label", "file", "n_test", "n_train"}``; the first ``n_test``
images of a class file are its test images (the train/test boundary). Resized entries
add ``resized_from`` (the 28x28 entry's key) and ``resize``. Class files are named
``digit_0.pklz``, ``upper_A.pklz``, ``lower_a.pklz`` (:func:`class_file_name`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_example_range, check_int, check_shape
from glyphforge._deprecation import warn_deprecated
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import CacheStore, Entry
from glyphforge.context import DataContext
from glyphforge.datasets._classes import BLANK, ClassNames
from glyphforge.datasets._emnist_archive import EMNIST_ZIP, NATIVE_SHAPE, read_split, write_native, write_resized
from glyphforge.datasets._emnist_catalog import (
    CLASSES,
    DEFAULT_SPLIT,
    SPLITS,
    SUBSETS,
    EMNISTFormatError,
    check_classes,
    check_split,
    check_splits,
    check_subset,
    class_file_name,
    preview_selection,
    select,
)
from glyphforge.datasets._prepare import check_shapes, given_archives, upstream_file

__all__ = [
    "BLANK", "DEFAULT_METHOD", "DEFAULT_SPLIT", "EMNIST", "EMNISTFormatError", "EMNIST_ZIP", "KIND", "NATIVE_SHAPE",
    "SPLITS", "SUBSETS", "class_file_name", "emnist_classes", "glyph_images", "load_emnist", "prepare_emnist",
    "preview_examples",
]

KIND = "emnist"
#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


def __getattr__(name: str) -> Any:
    if name == "RESIZE_METHOD":  # the name before 0.2
        warn_deprecated("glyphforge.datasets.emnist.RESIZE_METHOD", "glyphforge.datasets.emnist.DEFAULT_METHOD")
        return DEFAULT_METHOD
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def emnist_classes(split: str = DEFAULT_SPLIT) -> list[str]:
    """Return the class characters of ``split`` in label order (no download needed).

    ``byclass``: 0-9, A-Z, a-z (62); ``bymerge`` and ``balanced``: 0-9, A-Z and
    ``abdefghnqrt`` (47); ``letters``: A-Z (labels 1-26); ``digits`` and ``mnist``: 0-9.
    """
    return list(CLASSES[check_split(split)])


# -- prepare -------------------------------------------------------------------
def _params(split: str, shape: tuple[int, int]) -> dict[str, Any]:
    """The cache params of the entry of ``(split, shape)``."""
    params: dict[str, Any] = {"split": split, "shape": list(shape), "source": EMNIST_ZIP.hash}
    if shape != NATIVE_SHAPE:
        params["resize"] = DEFAULT_METHOD
    return params


def _given_zip(archives: Mapping[str, PathLike] | None, archive: PathLike | None) -> PathLike | None:
    """The local ``gzip.zip`` given as ``archives`` (or as the deprecated ``archive``), if any."""
    if archive is not None:
        if archives is not None:
            raise ValueError("give archives={'gzip.zip': path} or the deprecated archive=path, not both")
        warn_deprecated("prepare_emnist(archive=...)", "prepare_emnist(archives={'gzip.zip': path})", stacklevel=4)
        archives = {EMNIST_ZIP.filename: archive}
    return given_archives(archives, {EMNIST_ZIP.filename: EMNIST_ZIP}, "EMNIST").get(EMNIST_ZIP.filename)


def prepare_emnist(
    *,
    split: str | Iterable[str] | None = None,
    shapes: Iterable[tuple[int, int]] = (),
    data_dir: PathLike | None = None,
    mirrors: Sequence[str] | str | None = None,
    archives: Mapping[str, PathLike] | None = None,
    verify: bool = True,
    progress: bool = True,
    offline: bool | None = None,
    archive: PathLike | None = None,
) -> list[Entry]:
    """Fetch, validate and convert EMNIST splits, and make resized variants.

    Idempotent: entries already in the cache are returned without touching the
    archive or the network. The archive is fetched (or checked) at most once.

    Parameters
    ----------
    split
        One of :data:`SPLITS`, or several (an iterable; repeats are dropped). None:
        ``"byclass"``.
    shapes
        Extra ``(height, width)`` variants, each the box resize of the 28x28 entry.
    data_dir
        The data dir (see :mod:`glyphforge.config`).
    mirrors
        Mirror bases tried before the origin (see :func:`glyphforge.pipelines.download.fetch`).
    archives
        ``{"gzip.zip": path}``: a local copy of NIST's archive to convert instead of
        fetching one (used in place, not copied).
    verify
        Check the archive's md5 against NIST's. False (for custom or test archives)
        skips that check for ``archives`` and for a ``gzip.zip`` already in
        ``<data dir>/raw/emnist/``; a download is always verified. The archive's
        structure (members, IDX headers and sizes, mapping, labels) is always validated.
    progress
        Show progress bars.
    offline
        True: never use the network (a file in place, ``archives`` and local mirrors
        only); None: ``$GLYPHFORGE_OFFLINE`` decides.
    archive
        Deprecated spelling of ``archives={"gzip.zip": archive}``.

    Returns
    -------
    list of Entry
        For each split in order: its 28x28 entry, then one entry per distinct other shape.

    Raises
    ------
    ValueError
        For an unknown split, a bad shape, an ``archives`` key other than ``"gzip.zip"``,
        or both ``archives`` and ``archive``.
    DownloadError
        When the archive cannot be fetched (the message says where to place it by hand).
    HashMismatchError
        When ``verify`` and the archive's md5 is not NIST's (nothing is cached).
    IDXError, EMNISTFormatError, ArchiveError
        When the archive is truncated or corrupt (nothing is cached).
    """
    names = check_splits(split)
    wanted = [shape for shape in check_shapes(shapes) if shape != NATIVE_SHAPE]
    given = _given_zip(archives, archive)
    context = DataContext.resolve(data_dir=data_dir, mirrors=mirrors, offline=offline, verify=verify, progress=progress)
    store = context.store
    source: tuple[Path, bool] | None = None  # the archive and whether its hash was checked, once needed
    entries = []
    for name in names:
        base = store.get(KIND, _params(name, NATIVE_SHAPE))
        if base is None:
            source = source or upstream_file(EMNIST_ZIP, context, given)
            parsed = read_split(source[0], name, progress)  # before the cache is touched: errors leave no trace
            write = partial(write_native, split=parsed, verified=source[1], progress=progress)
            base = store.get_or_create(KIND, _params(name, NATIVE_SHAPE), write)
        entries.append(base)
        for shape in wanted:
            write = partial(write_resized, base=base, shape=shape, method=DEFAULT_METHOD, progress=progress)
            entries.append(store.get_or_create(KIND, _params(name, shape), write))
    return entries


# -- load ----------------------------------------------------------------------
def _request(
    classes: Iterable[str | int] | None,
    split: str,
    subset: str,
    shape: tuple[int, int] | None,
    example_range: tuple[float, float] | None,
) -> tuple[list[str], tuple[int, int], tuple[float, float] | None]:
    """Check a load's arguments; return the sorted classes, the shape and the example range."""
    check_split(split)
    check_subset(subset)
    names = check_classes(classes, split)
    return names, NATIVE_SHAPE if shape is None else check_shape(shape), check_example_range(example_range)


def _entry(
    split: str,
    shape: tuple[int, int],
    data_dir: PathLike | None,
    download: bool,
    mirrors: Sequence[str] | str | None,
    offline: bool | None,
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
    return prepare_emnist(split=split, shapes=[shape], data_dir=data_dir, mirrors=mirrors, offline=offline)[-1]


def load_emnist(
    classes: Iterable[str | int] | None,
    *,
    split: str = DEFAULT_SPLIT,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    data_dir: PathLike | None = None,
    download: bool = True,
    mirrors: Sequence[str] | str | None = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load EMNIST images of some classes, shuffled, reading only those classes' files.

    Parameters
    ----------
    classes
        Characters (a string such as ``"0123456789"`` works; digits may be ints), or
        None for every class of the split. They are de-duplicated and sorted.
    split
        One of :data:`SPLITS`.
    subset
        ``"train"`` (the default), ``"test"`` or ``"all"`` (test and train).
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
    data_dir, mirrors, offline
        As in :func:`prepare_emnist`.
    download
        Prepare the split (fetching the archive) when it is not in the cache.

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n, H, W)``, white strokes on black.
    y : numpy.ndarray
        int64 ``(n,)``: indices into ``classes``.
    classes : ClassNames
        The sorted class characters (then ``' '`` with ``include_blank``).

    Raises
    ------
    ValueError
        For an unknown split, subset or class, a bad shape, example range or
        ``n_examples``, or more ``n_examples`` than images selected.
    FileNotFoundError
        When the split is not prepared and ``download`` is False.
    """
    names, shape, checked_range = _request(classes, split, subset, shape, example_range)
    if n_examples is not None:  # checked before anything is fetched
        check_int("n_examples", n_examples, 0)
    entry = _entry(split, shape, data_dir, download, mirrors, offline)
    selection = select(entry, names, subset, checked_range, balance, include_blank)
    x, y = selection.shuffled(n_examples, seed)
    return x, y, selection.classes


class EMNIST(MapStyleDataset):
    """One EMNIST split as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``.

    Images are in a fixed order (classes in sorted order, each class's images in its
    file order), so a PyTorch ``DataLoader`` (which shuffles) or :meth:`batches` takes
    it as is. ``images`` is uint8 ``(n, H, W)``; ``labels`` int64 indices into
    ``classes`` (a :class:`ClassNames`).

    Parameters
    ----------
    split, subset, shape, classes, balance, include_blank, example_range, data_dir, download, mirrors, offline
        As in :func:`load_emnist` (``subset`` defaults to ``"train"`` there too).
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    """

    def __init__(
        self,
        split: str = DEFAULT_SPLIT,
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
        mirrors: Sequence[str] | str | None = None,
        offline: bool | None = None,
    ) -> None:
        names, self.shape, checked_range = _request(classes, split, subset, shape, example_range)
        self.split, self.subset = split, subset
        entry = _entry(split, self.shape, data_dir, download, mirrors, offline)
        selection = select(entry, names, subset, checked_range, balance, include_blank)
        self.images, self.labels = selection.in_order()
        self.classes = selection.classes
        self.transform = transform

    def __repr__(self) -> str:
        return (
            f"EMNIST(split={self.split!r}, subset={self.subset!r}, shape={self.shape}, "
            f"{len(self)} images, {len(self.classes)} classes)"
        )


# -- registry parts (cache only) ---------------------------------------------------
def preview_examples(
    entry: Entry, n: int, rng: np.random.Generator, data_dir: PathLike | None
) -> tuple[np.ndarray, list[str]]:
    """Return ``n`` images of the prepared ``entry`` (any shape) and the character of each (registry's preview).

    ``rng`` picks up to ``n`` distinct classes, then ``n`` of their images (test and
    train; fewer if they hold fewer). Only ``entry``'s class files are read, so
    ``data_dir`` (part of the preview contract) is not needed.
    """
    return preview_selection(entry, n, rng)


def glyph_images(
    classes: Iterable[str | int] | None,
    *,
    example_range: tuple[float, float] | None,
    shape: tuple[int, int] | None,
    data_dir: PathLike | None,
    split: str = DEFAULT_SPLIT,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the glyph images scenes draw (the registry's glyphs part), reading the cache only.

    The result is exactly ``load_emnist(classes, split=split, subset="all", shape=shape,
    example_range=example_range, seed=0, data_dir=data_dir, download=False)``: every
    image of the range of each class's test and train images, shuffled with seed 0.
    Unlike that call, it never makes a missing resized entry: build workers must not
    write to the cache nor download.

    Raises
    ------
    FileNotFoundError
        When the entry of ``(split, shape)`` (None: 28x28) is not prepared; the message
        names the ``prepare-data`` command that makes it.
    """
    names, shape, checked_range = _request(classes, split, "all", shape, example_range)
    store = CacheStore.for_data_dir(data_dir)
    entry = store.get(KIND, _params(split, shape))
    if entry is None:
        size = f"{shape[0]}x{shape[1]}"
        raise FileNotFoundError(
            f"EMNIST {split} at {size} is not prepared in {store.root}: run "
            f"`prepare-data emnist --split {split} --shape {size}` first (glyph images are read from the cache "
            "only, never downloaded)"
        )
    selection = select(entry, names, "all", checked_range, balance=False, include_blank=False)
    x, y = selection.shuffled(None, 0)
    return x, y, selection.classes
