"""The MNIST family: MNIST, Fashion-MNIST and Kuzushiji-MNIST (KMNIST), declared as per-class datasets.

The three datasets have the same form (four gzipped IDX files of 60,000 train and
10,000 test upright 28x28 images in 10 classes, read by
:mod:`glyphforge.datasets.mnist_files`) and differ only in their declaration
(:data:`DATASETS`): name, title, class names and upstream files. Everything else is
:mod:`glyphforge.datasets.classes.files`; the per-dataset names are typed functions calling it with
their declaration:

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
classes they load in that order, upstream's, so with every class ``y`` is the upstream
label; the map-style classes give upstream's examples in upstream's order.

Cache entries
-------------
One entry per ``(dataset, shape)``, of kind the dataset's name, in the format of
:mod:`glyphforge.datasets.classes.files`: the params ``{"shape", "source", "layout"}``
(``source``: ``{file name: pinned hash}`` of the four files; for an own copy, each file
that is not upstream's by its ``sha256:``) and, for any shape but
28x28, ``"resize": "box"``: the box resize (Pillow's ``BOX``, exactly) of every image of
the 28x28 entry. An entry holds one uint8 ``(n, H, W)`` file per class, ``class_00.pklz``
... ``class_09.pklz`` by label, the class's test images first, then its train images,
each in file order, and ``upstream_labels.pklz``, the label of every test example, then
of every train example, in file order (the params hold ``"layout": 2``). ``entry.meta``
holds ``dataset``, ``shape``, ``n_images``, ``n_train``, ``n_test``, ``verified`` (False
when made from files used unchecked, ``verify=False``) and ``classes``: one record per class in label order, ``{"name",
"label", "file", "n_test", "n_train"}``. Resized entries add ``resized_from`` and
``resize``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from glyphforge._checks import PathLike
from glyphforge.cache import Entry
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets.class_names import BLANK, ClassNames
from glyphforge.datasets.classes import load as _class_load
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.args import SUBSETS, class_names
from glyphforge.datasets.classes.declaration import DECLARATIONS, DEFAULT_CONFIG, Config, Declaration, declare
from glyphforge.datasets.classes.files import documented
from glyphforge.datasets.classes.load import ClassFilesDataset, config_option_init
from glyphforge.datasets.mnist_files import NATIVE_SHAPE, MNISTFormatError, read_files
from glyphforge.pipelines.resource import Resource

__all__ = [
    "BLANK", "DATASETS", "DEFAULT_METHOD", "FashionMNIST", "KMNIST", "MNIST", "MNISTFamilyDataset", "MNISTFormatError",
    "NAMES", "NATIVE_SHAPE", "SUBSETS", "dataset_classes", "fashion_mnist_classes", "fashion_mnist_glyph_images",
    "glyph_images", "kmnist_classes", "kmnist_glyph_images", "load_dataset", "load_fashion_mnist", "load_kmnist",
    "load_mnist", "mnist_classes", "mnist_glyph_images", "prepare_dataset", "prepare_fashion_mnist",
    "prepare_kmnist", "prepare_mnist", "preview_examples",
]

#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


def _declare(
    name: str, title: str, classes: tuple[str, ...], base_urls: tuple[str, ...], pins: Mapping[str, tuple[str, int]]
) -> Declaration:
    """Declare one dataset of the family: its four files under the first of ``base_urls`` (the others as second
    sources), with md5 as torchvision pins them and sizes as tensorflow-datasets records them."""
    resources = {
        filename: Resource(name, filename, base_urls[0] + filename, f"md5:{md5}", size,
                           more_urls=tuple(base + filename for base in base_urls[1:]))
        for filename, (md5, size) in pins.items()
    }
    return declare(Declaration(name=name, title=title, resources=resources,
                               configs={DEFAULT_CONFIG: Config(classes, (60_000, 10_000))},
                               reader=read_files, default_resize=DEFAULT_METHOD, native_shape=NATIVE_SHAPE))


#: The family's declarations, by name (also in ``_class_declaration.DECLARATIONS``, where tests swap one).
DATASETS: dict[str, Declaration] = {declared.name: declared for declared in (
    _declare("mnist", "MNIST", tuple("0123456789"),
             ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"), {
        "train-images-idx3-ubyte.gz": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
        "train-labels-idx1-ubyte.gz": ("d53e105ee54ea40749a09fcbcd1e9432", 28_881),
        "t10k-images-idx3-ubyte.gz": ("9fb629c4189551a2d022fa330f9573f3", 1_648_877),
        "t10k-labels-idx1-ubyte.gz": ("ec29112dd5afa0611ce80d1b7f02629c", 4_542),
    }),
    _declare("fashion-mnist", "Fashion-MNIST",
             ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
             ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",), {
        "train-images-idx3-ubyte.gz": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26_421_880),
        "train-labels-idx1-ubyte.gz": ("25c81989df183df01b3e8a0aad5dffbe", 29_515),
        "t10k-images-idx3-ubyte.gz": ("bef4ecab320f06d8554ea6380940ec79", 4_422_102),
        "t10k-labels-idx1-ubyte.gz": ("bb300cfdad3c16e7a12a480ee83cd310", 5_148),
    }),
    _declare("kmnist", "KMNIST", ("o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"),
             ("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",), {
        "train-images-idx3-ubyte.gz": ("bdb82020997e1d708af4cf47b453dcf7", 18_165_135),
        "train-labels-idx1-ubyte.gz": ("e144d726b3acfaa3e44228e80efcd344", 29_497),
        "t10k-images-idx3-ubyte.gz": ("5c965bf0a639b31b8f53240b1b52f4d7", 3_041_136),
        "t10k-labels-idx1-ubyte.gz": ("7320c461ea6c1c855c0b718fb2a4b134", 5_120),
    }),
)}
#: The datasets of the family (their registry names).
NAMES = tuple(DATASETS)


def _declaration(dataset: str) -> Declaration:
    if dataset not in NAMES:
        raise ValueError(f"unknown MNIST-family dataset {dataset!r}: use one of {', '.join(NAMES)}")
    return DECLARATIONS[dataset]


def prepare_dataset(dataset: str, **options: Any) -> Any:
    """Prepare one dataset of the family by name: ``prepare_mnist(**options)`` and its siblings."""
    return _class_prepare.prepare(_declaration(dataset), **options)


def load_dataset(dataset: str, *args: Any, **options: Any) -> Any:
    """Load one dataset of the family by name: ``load_mnist(*args, **options)`` and its siblings."""
    return _class_load.load(_declaration(dataset), *args, **options)


def glyph_images(dataset: str, *args: Any, **options: Any) -> Any:
    """The glyphs of one dataset of the family by name: ``mnist_glyph_images(*args, **options)`` and its siblings."""
    return _class_load.glyph_images(_declaration(dataset), *args, **options)


def dataset_classes(dataset: str) -> list[str]:
    """Return the class names of ``dataset`` in label order (no download needed)."""
    return class_names(_declaration(dataset))


preview_examples = _class_load.preview

# -- each dataset's public functions: the machinery called with its declaration --------------------
@documented(_class_prepare.prepare, "mnist")
def prepare_mnist(
    *,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert MNIST, and make resized variants."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)
    return _class_prepare.prepare(DECLARATIONS["mnist"], shapes=shapes, archives=archives, context=context)


@documented(_class_load.load, "mnist")
def load_mnist(
    classes: Iterable[str | int] | str | None = None,
    *,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load MNIST images of some classes, shuffled, reading only those classes' files."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    return _class_load.load(DECLARATIONS["mnist"], classes, subset=subset, balance=balance, include_blank=include_blank,
                            shape=shape, n_examples=n_examples, example_range=example_range, seed=seed, context=context)


@documented(class_names, "mnist")
def mnist_classes() -> list[str]:
    """Return the class names of MNIST in label order (no download needed)."""
    return class_names(DECLARATIONS["mnist"])


@documented(_class_load.glyph_images, "mnist")
def mnist_glyph_images(
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the MNIST glyph images scenes draw, reading the cache only."""
    context = DataContext.resolve(context, data_dir=data_dir)
    return _class_load.glyph_images(DECLARATIONS["mnist"], classes, example_range=example_range, shape=shape,
                                    context=context)


@documented(_class_prepare.prepare, "fashion-mnist")
def prepare_fashion_mnist(
    *,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert Fashion-MNIST, and make resized variants."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)
    return _class_prepare.prepare(DECLARATIONS["fashion-mnist"], shapes=shapes, archives=archives, context=context)


@documented(_class_load.load, "fashion-mnist")
def load_fashion_mnist(
    classes: Iterable[str | int] | str | None = None,
    *,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load Fashion-MNIST images of some classes, shuffled, reading only those classes' files."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    return _class_load.load(DECLARATIONS["fashion-mnist"], classes, subset=subset, balance=balance,
                            include_blank=include_blank, shape=shape, n_examples=n_examples,
                            example_range=example_range, seed=seed, context=context)


@documented(class_names, "fashion-mnist")
def fashion_mnist_classes() -> list[str]:
    """Return the class names of Fashion-MNIST in label order (no download needed)."""
    return class_names(DECLARATIONS["fashion-mnist"])


@documented(_class_load.glyph_images, "fashion-mnist")
def fashion_mnist_glyph_images(
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the Fashion-MNIST glyph images scenes draw, reading the cache only."""
    context = DataContext.resolve(context, data_dir=data_dir)
    return _class_load.glyph_images(DECLARATIONS["fashion-mnist"], classes, example_range=example_range, shape=shape,
                                    context=context)


@documented(_class_prepare.prepare, "kmnist")
def prepare_kmnist(
    *,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert KMNIST, and make resized variants."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)
    return _class_prepare.prepare(DECLARATIONS["kmnist"], shapes=shapes, archives=archives, context=context)


@documented(_class_load.load, "kmnist")
def load_kmnist(
    classes: Iterable[str | int] | str | None = None,
    *,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load KMNIST images of some classes, shuffled, reading only those classes' files."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    return _class_load.load(DECLARATIONS["kmnist"], classes, subset=subset, balance=balance,
                            include_blank=include_blank, shape=shape, n_examples=n_examples,
                            example_range=example_range, seed=seed, context=context)


@documented(class_names, "kmnist")
def kmnist_classes() -> list[str]:
    """Return the class names of KMNIST in label order (no download needed)."""
    return class_names(DECLARATIONS["kmnist"])


@documented(_class_load.glyph_images, "kmnist")
def kmnist_glyph_images(
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the KMNIST glyph images scenes draw, reading the cache only."""
    context = DataContext.resolve(context, data_dir=data_dir)
    return _class_load.glyph_images(DECLARATIONS["kmnist"], classes, example_range=example_range, shape=shape,
                                    context=context)


class MNISTFamilyDataset(ClassFilesDataset):
    """One dataset of the family as a map-style dataset (see `glyphforge.datasets.classes.load.ClassFilesDataset`).

    Use a subclass (:class:`MNIST`, :class:`FashionMNIST`, :class:`KMNIST`), which names its dataset:
    ``MNIST(root=None, train=None, transform=None, target_transform=None, download=None, *, subset=None,
    shape=None, context=None, ...)``, torchvision's arguments first.
    """

    if TYPE_CHECKING:  # what config_option_init makes, for type checkers (tests/test_typing.py checks it)
        def __init__(
            self,
            root: PathLike | None = None,
            train: bool | None = None,
            transform: Callable[[np.ndarray], Any] | None = None,
            target_transform: Callable[[Any], Any] | None = None,
            download: bool | None = None,
            *,
            subset: str | None = None,
            shape: tuple[int, int] | None = None,
            context: DataContext | None = None,
            classes: Iterable[str | int] | str | None = None,
            balance: bool = False,
            include_blank: bool = False,
            example_range: tuple[float, float] | None = None,
            data_dir: PathLike | None = None,
            mirrors: Mirrors = None,
            offline: bool | None = None,
        ) -> None: ...
    else:
        __init__ = config_option_init(None)  # one config: no config keyword


class MNIST(MNISTFamilyDataset):
    """MNIST's handwritten digits as a map-style dataset, e.g. ``MNIST("data", train=True)``."""

    name = "mnist"


class FashionMNIST(MNISTFamilyDataset):
    """Fashion-MNIST's clothes as a map-style dataset, e.g. ``FashionMNIST(subset="test")``."""

    name = "fashion-mnist"


class KMNIST(MNISTFamilyDataset):
    """Kuzushiji-MNIST's cursive kana as a map-style dataset, e.g. ``KMNIST()``."""

    name = "kmnist"
