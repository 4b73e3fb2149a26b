"""MNIST, LeCun's handwritten digits, declared as a per-class dataset in MNIST's form, and its public names.

The MNIST family (MNIST, Fashion-MNIST in :mod:`glyphforge.datasets.fashion_mnist` and
Kuzushiji-MNIST in :mod:`glyphforge.datasets.kmnist`) has one form: four gzipped IDX files of
60,000 train and 10,000 test upright 28x28 images in 10 classes
(:mod:`glyphforge.datasets.classes.mnist_form`: their reader and the map-style base class
:class:`~glyphforge.datasets.classes.mnist_form.MNISTFamilyDataset`). The datasets differ only in
their declaration (:data:`DATASET`): name, title, class names and upstream files. Everything
else is :mod:`glyphforge.datasets.classes.files`; MNIST's public names are typed functions
calling it with the declaration, and the other two datasets' are these, bound to their own
declaration (:func:`~glyphforge.datasets.classes.files.like`):

- prepare: :func:`prepare_mnist`; load: :func:`load_mnist`; the map-style dataset :class:`MNIST`;
- the class list: :func:`mnist_classes`; the glyphs scenes draw: :func:`mnist_glyph_images`;
  and one :func:`preview_examples` for the family.

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

from collections.abc import Iterable, Mapping

import numpy as np

from glyphforge._checks import PathLike
from glyphforge.cache import Entry
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets.class_names import BLANK, ClassNames
from glyphforge.datasets.classes import load as _class_load
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.args import SUBSETS, class_names
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.classes.files import documented
from glyphforge.datasets.classes.mnist_form import (
    DEFAULT_METHOD,
    NATIVE_SHAPE,
    MNISTFamilyDataset,
    MNISTFormatError,
    declare_idx,
)

__all__ = [
    "BLANK", "DATASET", "DEFAULT_METHOD", "MNIST", "MNISTFamilyDataset", "MNISTFormatError", "NATIVE_SHAPE", "SUBSETS",
    "load_mnist", "mnist_classes", "mnist_glyph_images", "prepare_mnist", "preview_examples",
]

#: MNIST, declared (see the module docstring).
DATASET = declare_idx("mnist", "MNIST", tuple("0123456789"),
                      ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"), {
    "train-images-idx3-ubyte.gz": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
    "train-labels-idx1-ubyte.gz": ("d53e105ee54ea40749a09fcbcd1e9432", 28_881),
    "t10k-images-idx3-ubyte.gz": ("9fb629c4189551a2d022fa330f9573f3", 1_648_877),
    "t10k-labels-idx1-ubyte.gz": ("ec29112dd5afa0611ce80d1b7f02629c", 4_542),
})

preview_examples = _class_load.preview


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
    return _class_load.load(DECLARATIONS["mnist"], classes, subset=subset, balance=balance,
                            include_blank=include_blank, shape=shape, n_examples=n_examples,
                            example_range=example_range, seed=seed, context=context)


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


class MNIST(MNISTFamilyDataset):
    """MNIST's handwritten digits as a map-style dataset, e.g. ``MNIST("data", train=True)``."""

    name = "mnist"
