"""The MNIST family: MNIST, Fashion-MNIST and Kuzushiji-MNIST (KMNIST), one implementation for the three.

The three datasets have the same form (four gzipped IDX files of 60,000 train and
10,000 test upright 28x28 images in 10 classes; :mod:`glyphforge.datasets._mnist_files`)
and differ only in their record there: name, title, class names and upstream files.
Every function here takes the dataset's name (:data:`NAMES`); the per-dataset names are
those functions with it fixed:

- prepare: :func:`prepare_mnist`, :func:`prepare_fashion_mnist`, :func:`prepare_kmnist`;
- load: :func:`load_mnist`, :func:`load_fashion_mnist`, :func:`load_kmnist`;
- map-style datasets: :class:`MNIST`, :class:`FashionMNIST`, :class:`KMNIST` (one base,
  :class:`MNISTFamilyDataset`);
- the class lists: :func:`mnist_classes`, :func:`fashion_mnist_classes`, :func:`kmnist_classes`;
- the glyphs scenes draw: :func:`mnist_glyph_images`, :func:`fashion_mnist_glyph_images`,
  :func:`kmnist_glyph_images`; and one :func:`preview_examples` for the three.

Classes: MNIST the digits ``0``-``9``; Fashion-MNIST ``T-shirt/top``, ``Trouser``,
``Pullover``, ``Dress``, ``Coat``, ``Sandal``, ``Shirt``, ``Sneaker``, ``Bag``,
``Ankle boot``; KMNIST ``o``, ``ki``, ``su``, ``tsu``, ``na``, ``ha``, ``ma``, ``ya``,
``re``, ``wo`` (in label order, as ``*_classes()`` lists them). Loaders return the
classes they load sorted, like every glyphforge loader, so ``y`` indexes the sorted
names, not the upstream labels (for MNIST the two agree).

Cache entries
-------------
One entry per ``(dataset, shape)``, of kind the dataset's name, with the params
``{"shape", "source"}`` (``source``: the pinned hash of each upstream file) and, for any
shape but 28x28, ``"resize": "box"``: the box resize (Pillow's ``BOX``, exactly) of
every image of the 28x28 entry. An entry holds one uint8 ``(n, H, W)`` file per class,
``class_00.pklz`` ... ``class_09.pklz`` by label, the class's test images first, then its
train images, each in file order. ``entry.meta`` holds ``dataset``, ``shape``,
``n_images``, ``n_train``, ``n_test``, ``verified_files`` (False when made from files
used unchecked, ``verify=False``) and ``classes``: one record per class in label order,
``{"name", "label", "file", "n_test", "n_train"}``. Resized entries add ``resized_from``
and ``resize``. Which images a load takes is EMNIST's rule
(:mod:`glyphforge.datasets._emnist_catalog`, whose selection code this module uses).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

import numpy as np

from glyphforge._checks import PathLike, check_example_range, check_int, check_shape
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import CacheStore, Entry
from glyphforge.context import DataContext
from glyphforge.datasets._classes import BLANK, ClassNames
from glyphforge.datasets._emnist_catalog import SUBSETS, check_subset, preview_selection, select
from glyphforge.datasets._mnist_files import (
    DATASETS,
    NATIVE_SHAPE,
    Family,
    MNISTFormatError,
    read_files,
    write_native,
    write_resized,
)
from glyphforge.datasets._prepare import check_shapes, given_archives, upstream_file

__all__ = [
    "BLANK", "DEFAULT_METHOD", "FashionMNIST", "KMNIST", "MNIST", "MNISTFamilyDataset", "MNISTFormatError", "NAMES",
    "NATIVE_SHAPE", "SUBSETS", "dataset_classes", "fashion_mnist_classes", "fashion_mnist_glyph_images",
    "glyph_images", "kmnist_classes", "kmnist_glyph_images", "load_dataset", "load_fashion_mnist", "load_kmnist",
    "load_mnist", "mnist_classes", "mnist_glyph_images", "prepare_dataset", "prepare_fashion_mnist",
    "prepare_kmnist", "prepare_mnist", "preview_examples",
]

#: The datasets of the family (their registry names).
NAMES = ("mnist", "fashion-mnist", "kmnist")
#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


def _family(dataset: str) -> Family:
    try:
        return DATASETS[dataset]
    except (KeyError, TypeError):
        raise ValueError(f"unknown MNIST-family dataset {dataset!r}: use one of {', '.join(NAMES)}") from None


def dataset_classes(dataset: str) -> list[str]:
    """Return the class names of ``dataset`` in label order (no download needed)."""
    return list(_family(dataset).classes)


# -- prepare -------------------------------------------------------------------------
def _params(family: Family, shape: tuple[int, int]) -> dict[str, Any]:
    """The cache params of the entry of ``(family, shape)``."""
    source = {name: resource.hash for name, resource in sorted(family.resources.items())}
    params: dict[str, Any] = {"shape": list(shape), "source": source}
    if shape != NATIVE_SHAPE:
        params["resize"] = DEFAULT_METHOD
    return params


def prepare_dataset(
    dataset: str,
    *,
    shapes: Iterable[tuple[int, int]] = (),
    data_dir: PathLike | None = None,
    mirrors: Sequence[str] | str | None = None,
    archives: Mapping[str, PathLike] | None = None,
    verify: bool = True,
    progress: bool = True,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert one dataset of the family, and make resized variants.

    Idempotent: entries already in the cache are returned without touching the files
    or the network. The four upstream files land in ``<data dir>/raw/<dataset>/``.

    Parameters
    ----------
    dataset
        One of :data:`NAMES`.
    shapes
        Extra ``(height, width)`` variants, each the box resize of the 28x28 entry.
    data_dir
        The data dir (see :mod:`glyphforge.config`).
    mirrors
        Mirror bases tried before the origin; a mirror ``M`` serves ``M/<dataset>/<file>``.
    archives
        ``{file name: path}``: local copies of some of the four files (e.g.
        ``{"train-images-idx3-ubyte.gz": path}``), used in place instead of fetching them.
    verify
        Check each file's md5 against the pinned one. False (custom copies) uses
        ``archives`` and files already in the raw dir unchecked, and lets them hold
        other counts than upstream's (up to 1.25x); a download is always verified. The
        files' structure (IDX headers, 28x28, labels 0-9, counts agreeing) is always checked.
    progress
        Show progress bars.
    offline
        True: never use the network (files in place, ``archives`` and local mirrors
        only); None: ``$GLYPHFORGE_OFFLINE`` decides.

    Returns
    -------
    list of Entry
        The 28x28 entry, then one entry per distinct other shape.

    Raises
    ------
    ValueError
        For an unknown dataset, a bad shape or an ``archives`` name that is none of the files.
    DownloadError
        When a file cannot be fetched (the message says where to place it by hand).
    HashMismatchError
        When ``verify`` and a file's md5 is not the pinned one (nothing is cached).
    IDXError, MNISTFormatError
        When a file is truncated or corrupt, or the files disagree (nothing is cached).
    """
    family = _family(dataset)
    wanted = [shape for shape in check_shapes(shapes) if shape != NATIVE_SHAPE]
    given = given_archives(archives, family.resources, family.title)
    context = DataContext.resolve(data_dir=data_dir, mirrors=mirrors, offline=offline, verify=verify, progress=progress)
    store = context.store
    base = store.get(family.name, _params(family, NATIVE_SHAPE))
    if base is None:
        files: dict[str, tuple[Path, bool]] = {
            name: upstream_file(resource, context, given.get(name))
            for name, resource in family.resources.items()
        }
        train, test = read_files(family, files, progress)  # before the cache is touched: errors leave no trace
        verified = all(checked for _, checked in files.values())
        write = partial(write_native, family=family, train=train, test=test, verified=verified, progress=progress)
        base = store.get_or_create(family.name, _params(family, NATIVE_SHAPE), write)
    entries = [base]
    for shape in wanted:
        write = partial(write_resized, base=base, shape=shape, method=DEFAULT_METHOD, progress=progress)
        entries.append(store.get_or_create(family.name, _params(family, shape), write))
    return entries


# -- load ------------------------------------------------------------------------------
def _check_classes(family: Family, classes: Iterable[str | int] | str | None) -> list[str]:
    """Return the sorted distinct class names of ``classes`` (None: every class), or raise.

    A string is one class name, but for MNIST (whose names are single characters) it is
    split into characters, as for EMNIST: ``"0123"``.
    """
    known = family.classes
    if classes is None:
        return sorted(known)
    if isinstance(classes, str):
        names = list(classes) if all(len(name) == 1 for name in known) else [classes]
    else:
        names = [str(item) for item in classes]
    unknown = sorted({name for name in names if name not in known})
    if unknown:
        raise ValueError(f"unknown {family.title} classes {unknown}: its classes are {', '.join(map(repr, known))}")
    if not names:
        raise ValueError("classes is empty: give at least one class, or None for all")
    return sorted(set(names))


def _request(
    dataset: str,
    classes: Iterable[str | int] | str | None,
    subset: str,
    shape: tuple[int, int] | None,
    example_range: tuple[float, float] | None,
) -> tuple[Family, list[str], tuple[int, int], tuple[float, float] | None]:
    """Check a load's arguments; return the family, the sorted classes, the shape and the example range."""
    family = _family(dataset)
    check_subset(subset)
    names = _check_classes(family, classes)
    return family, names, NATIVE_SHAPE if shape is None else check_shape(shape), check_example_range(example_range)


def _entry(
    family: Family,
    shape: tuple[int, int],
    data_dir: PathLike | None,
    download: bool,
    mirrors: Sequence[str] | str | None,
    offline: bool | None,
) -> Entry:
    """Return the entry of ``(family, shape)``, preparing it when allowed."""
    store = CacheStore.for_data_dir(data_dir)
    entry = store.get(family.name, _params(family, shape))
    if entry is not None:
        return entry
    if not download and store.get(family.name, _params(family, NATIVE_SHAPE)) is None:
        raise FileNotFoundError(
            f"{family.title} is not prepared in {store.root}: run prepare_{family.ident}() or "
            f"`prepare-data {family.name}`, or pass download=True"
        )
    return prepare_dataset(family.name, shapes=[shape], data_dir=data_dir, mirrors=mirrors, offline=offline)[-1]


def load_dataset(
    dataset: str,
    classes: Iterable[str | int] | str | None = None,
    *,
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
    """Load images of some classes of one dataset of the family, shuffled, reading only those classes' files.

    The options and the result are :func:`glyphforge.load_emnist`'s.

    Parameters
    ----------
    dataset
        One of :data:`NAMES`.
    classes
        Class names (see ``*_classes()``; MNIST's digits may be ints or one string such
        as ``"0123"``), or None for every class. They are de-duplicated and sorted.
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
        images in the subset (adjacent ranges partition a class exactly).
    seed
        Seeds ``numpy.random.default_rng`` whose ``permutation`` shuffles the images.
    data_dir, mirrors, offline
        As in :func:`prepare_dataset`.
    download
        Prepare the dataset (fetching its files) when it is not in the cache.

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n, H, W)``, upright, white on black.
    y : numpy.ndarray
        int64 ``(n,)``: indices into ``classes``.
    classes : ClassNames
        The sorted class names (then ``' '`` with ``include_blank``).

    Raises
    ------
    ValueError
        For an unknown dataset, subset or class, a bad shape, example range or
        ``n_examples``, or more ``n_examples`` than images selected.
    FileNotFoundError
        When the dataset is not prepared and ``download`` is False.
    """
    family, names, shape, checked_range = _request(dataset, classes, subset, shape, example_range)
    if n_examples is not None:  # checked before anything is fetched
        check_int("n_examples", n_examples, 0)
    entry = _entry(family, shape, data_dir, download, mirrors, offline)
    selection = select(entry, names, subset, checked_range, balance, include_blank, key="name")
    x, y = selection.shuffled(n_examples, seed)
    return x, y, selection.classes


class MNISTFamilyDataset(MapStyleDataset):
    """One dataset of the family as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``.

    Use a subclass (:class:`MNIST`, :class:`FashionMNIST`, :class:`KMNIST`), which names
    its dataset. Images are in a fixed order (classes sorted, each class's images in its
    file order); ``images`` is uint8 ``(n, H, W)``, ``labels`` int64 indices into
    ``classes`` (a :class:`ClassNames`).

    Parameters
    ----------
    subset, shape, classes, balance, include_blank, example_range, data_dir, download, mirrors, offline
        As in :func:`load_dataset` (``subset`` defaults to ``"train"``).
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    """

    #: The dataset's name (one of :data:`NAMES`), set by each subclass.
    dataset: ClassVar[str]

    def __init__(
        self,
        subset: str = "train",
        shape: tuple[int, int] | None = None,
        *,
        classes: Iterable[str | int] | str | None = None,
        balance: bool = False,
        include_blank: bool = False,
        example_range: tuple[float, float] | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        data_dir: PathLike | None = None,
        download: bool = True,
        mirrors: Sequence[str] | str | None = None,
        offline: bool | None = None,
    ) -> None:
        if not hasattr(self, "dataset"):
            raise TypeError("MNISTFamilyDataset is the base of MNIST, FashionMNIST and KMNIST: use one of those")
        family, names, self.shape, checked_range = _request(self.dataset, classes, subset, shape, example_range)
        self.subset = subset
        entry = _entry(family, self.shape, data_dir, download, mirrors, offline)
        selection = select(entry, names, subset, checked_range, balance, include_blank, key="name")
        self.images, self.labels = selection.in_order()
        self.classes = selection.classes
        self.transform = transform

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(subset={self.subset!r}, shape={self.shape}, {len(self)} images, "
            f"{len(self.classes)} classes)"
        )


class MNIST(MNISTFamilyDataset):
    """MNIST's handwritten digits as a map-style dataset, e.g. ``MNIST("train")``.

    See :class:`MNISTFamilyDataset`.
    """

    dataset = "mnist"


class FashionMNIST(MNISTFamilyDataset):
    """Fashion-MNIST's clothes as a map-style dataset, e.g. ``FashionMNIST("test")``.

    See :class:`MNISTFamilyDataset`.
    """

    dataset = "fashion-mnist"


class KMNIST(MNISTFamilyDataset):
    """Kuzushiji-MNIST's cursive kana as a map-style dataset, e.g. ``KMNIST()``.

    See :class:`MNISTFamilyDataset`.
    """

    dataset = "kmnist"


# -- registry parts (cache only) ---------------------------------------------------------
def preview_examples(
    entry: Entry, n: int, rng: np.random.Generator, data_dir: PathLike | None
) -> tuple[np.ndarray, list[str]]:
    """Return ``n`` images of the prepared ``entry`` (any dataset of the family, any shape) and their class names.

    ``rng`` picks up to ``n`` distinct classes, then ``n`` of their images (test and
    train; fewer if they hold fewer). Only ``entry``'s class files are read.
    """
    return preview_selection(entry, n, rng, key="name")


def glyph_images(
    dataset: str,
    classes: Iterable[str | int] | str | None,
    *,
    example_range: tuple[float, float] | None,
    shape: tuple[int, int] | None,
    data_dir: PathLike | None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the glyph images scenes draw (the registry's glyphs part), reading the cache only.

    The result is exactly ``load_dataset(dataset, classes, subset="all", shape=shape,
    example_range=example_range, seed=0, data_dir=data_dir, download=False)``, but a
    missing resized entry is never made: build workers must not write to the cache.

    Raises
    ------
    FileNotFoundError
        When the entry of ``shape`` (None: 28x28) is not prepared; the message names
        the ``prepare-data`` command that makes it.
    """
    family, names, shape, checked_range = _request(dataset, classes, "all", shape, example_range)
    store = CacheStore.for_data_dir(data_dir)
    entry = store.get(family.name, _params(family, shape))
    if entry is None:
        size = f"{shape[0]}x{shape[1]}"
        raise FileNotFoundError(
            f"{family.title} at {size} is not prepared in {store.root}: run `prepare-data {family.name} --shape "
            f"{size}` first (glyph images are read from the cache only, never downloaded)"
        )
    selection = select(entry, names, "all", checked_range, balance=False, include_blank=False, key="name")
    x, y = selection.shuffled(None, 0)
    return x, y, selection.classes


# -- the per-dataset names -----------------------------------------------------------------
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _for_dataset(function: Callable[Concatenate[str, _P], _R], dataset: str, name: str) -> Callable[_P, _R]:
    """Return ``function`` with its first argument, the dataset, fixed: a module function called ``name``."""

    def bound(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return function(dataset, *args, **kwargs)

    signature = inspect.signature(function)
    bound.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect.signature and help()
        parameters=list(signature.parameters.values())[1:]
    )
    bound.__name__ = bound.__qualname__ = name
    bound.__doc__ = (
        f"{DATASETS[dataset].title}: :func:`{function.__name__}` with ``dataset={dataset!r}``.\n\n"
        f"{inspect.getdoc(function)}"
    )
    return bound


prepare_mnist = _for_dataset(prepare_dataset, "mnist", "prepare_mnist")
prepare_fashion_mnist = _for_dataset(prepare_dataset, "fashion-mnist", "prepare_fashion_mnist")
prepare_kmnist = _for_dataset(prepare_dataset, "kmnist", "prepare_kmnist")
load_mnist = _for_dataset(load_dataset, "mnist", "load_mnist")
load_fashion_mnist = _for_dataset(load_dataset, "fashion-mnist", "load_fashion_mnist")
load_kmnist = _for_dataset(load_dataset, "kmnist", "load_kmnist")
mnist_classes = _for_dataset(dataset_classes, "mnist", "mnist_classes")
fashion_mnist_classes = _for_dataset(dataset_classes, "fashion-mnist", "fashion_mnist_classes")
kmnist_classes = _for_dataset(dataset_classes, "kmnist", "kmnist_classes")
mnist_glyph_images = _for_dataset(glyph_images, "mnist", "mnist_glyph_images")
fashion_mnist_glyph_images = _for_dataset(glyph_images, "fashion-mnist", "fashion_mnist_glyph_images")
kmnist_glyph_images = _for_dataset(glyph_images, "kmnist", "kmnist_glyph_images")
