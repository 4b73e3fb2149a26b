"""Per-class datasets in MNIST's form: four gzipped IDX files, declared (:func:`declare_idx`), read and checked
(:func:`read_files`, their reader), and their map-style base class (:class:`MNISTFamilyDataset`).

MNIST, Fashion-MNIST and KMNIST (:mod:`glyphforge.datasets.mnist`,
:mod:`~glyphforge.datasets.fashion_mnist`, :mod:`~glyphforge.datasets.kmnist`), and any
per-class dataset in the same form, differ only in their declaration: name, title, class names
and upstream files. :func:`read_files` reads the files for :mod:`glyphforge.datasets.classes.files`,
which writes the entries; the declaration gives the title, the classes and the pinned counts
that are checked.

The files
---------
Each dataset has the same four files (:data:`FILES`), all gzipped IDX files:
``train-images-idx3-ubyte.gz`` and ``t10k-images-idx3-ubyte.gz`` (uint8 ``(n, 28, 28)``
images, stored **upright**, unlike EMNIST's transposed ones, white on black) and
``train-labels-idx1-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz`` (one uint8 label
0-9 per image). The same names in the three datasets, hence one folder per dataset.

Validation
----------
Everything is checked before the cache is touched, so bad files leave nothing behind,
and every error names the file (:class:`~glyphforge.pipelines.idx.IDXError`,
:class:`MNISTFormatError`): a complete gzip stream and IDX file of the right kind
(magic 2051 or 2049), 28x28 images, labels 0-9, as many labels as images, and the
count. A file whose md5 was checked (the default) must hold exactly the pinned count;
its header is refused before anything is allocated when it declares more. A file used
unchecked (``verify=False``, ``--no-verify``: a custom copy) may hold any count up to
:data:`COUNT_MARGIN` times the pinned one, also checked in its header first.

What is read
------------
:func:`read_files` returns the test and train images (upright) and labels; the entry
holds one file per class, ``class_00.pklz`` ... (:func:`class_file_name`: plain names
whatever the class is called, so ``T-shirt/top`` makes no folder and case-insensitive
filesystems are safe; the class name is kept in the manifest).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from glyphforge._checks import PathLike
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets.classes.declaration import (
    DEFAULT_CONFIG,
    Config,
    Declaration,
    Parsed,
    Subset,
    declare,
    numbered_file,
)
from glyphforge.datasets.classes.load import ClassFilesDataset, config_option_init
from glyphforge.errors import IntegrityError
from glyphforge.pipelines.idx import CountCap, read_images, read_labels
from glyphforge.pipelines.resource import Resource

if TYPE_CHECKING:
    from tqdm import tqdm

NATIVE_SHAPE = (28, 28)
#: The four upstream files of every dataset of the family: ``{subset: (images file, labels file)}``.
FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: A custom copy (``verify=False``) may hold up to this many times the pinned images of a subset.
COUNT_MARGIN = 1.25
#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


class MNISTFormatError(IntegrityError, ValueError):
    """The files' labels or counts do not describe the dataset; the message names the file."""


def class_file_name(label: int) -> str:
    """Return the entry file of the class of ``label``: ``class_00.pklz`` ... ``class_09.pklz``."""
    return numbered_file(label, "")


def count_cap(dataset: Declaration, config: str, subset: str, verified: bool) -> CountCap:
    """Return the most images (or labels) a ``subset`` file of ``dataset`` may declare in its header."""
    pinned = dataset.configs[config].count(subset)
    if verified:
        return CountCap(pinned, f"{dataset.title}'s {subset} files hold {pinned:,}, and this file's md5 was checked; "
                                "its header is corrupt: get a good copy")
    return CountCap(
        int(pinned * COUNT_MARGIN),
        f"{dataset.title} has {pinned:,} {subset} images, and a custom copy (verify=False, --no-verify) may hold at "
        f"most {COUNT_MARGIN:g}x that. The header is corrupt or this is not a {dataset.title} file: use the upstream "
        f"file (prepare-data {dataset.name} without --no-verify downloads it)",
    )


# -- reading ---------------------------------------------------------------------------
def read_files(dataset: Declaration, config: str, files: Mapping[str, tuple[Path, bool]], progress: bool) -> Parsed:
    """Read and validate the four files (train and test in parallel): the reader of the MNIST family's declarations.

    Parameters
    ----------
    dataset, config
        The declaration and its config (their title, classes and pinned counts).
    files
        ``{file name: (path, whether its md5 was checked)}`` for the four names of :data:`FILES`.
    progress
        Show a progress bar.

    Raises
    ------
    IDXError, MNISTFormatError
        When a file is truncated, corrupt, of the wrong kind or size, holds labels
        outside the classes, or the counts are wrong (see the module docstring).
    """
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
    with tqdm(total=4, desc=f"{dataset.title}: reading", unit="file", disable=not progress) as bar, \
            ThreadPoolExecutor(2) as pool:
        test, train = pool.map(lambda subset: _read_subset(dataset, config, subset, files, bar), ("test", "train"))
    return Parsed(test, train)


def _read_subset(
    dataset: Declaration, config: str, subset: str, files: Mapping[str, tuple[Path, bool]], bar: tqdm
) -> Subset:
    """Read one subset's labels and images, checking them against each other and the declaration."""
    (images_path, images_verified), (labels_path, labels_verified) = (files[name] for name in FILES[subset])
    title = dataset.title
    with open(labels_path, "rb") as stream:
        labels = read_labels(stream, str(labels_path), cap=count_cap(dataset, config, subset, labels_verified))
    bar.update()
    _check_count(dataset, config, subset, labels_path, len(labels), "labels", labels_verified)
    n_classes = len(dataset.configs[config].classes)
    outside = np.unique(labels[labels >= n_classes])
    if outside.size:
        raise MNISTFormatError(
            f"{labels_path} holds labels {outside.tolist()}, but {title}'s labels are 0-{n_classes - 1}; "
            f"the file is corrupt or not {title}'s"
        )
    with open(images_path, "rb") as stream:
        images = read_images(stream, str(images_path), dims=NATIVE_SHAPE,
                             cap=count_cap(dataset, config, subset, images_verified))
    bar.update()
    _check_count(dataset, config, subset, images_path, len(images), "images", images_verified)
    if len(images) != len(labels):
        raise MNISTFormatError(
            f"{images_path} holds {len(images):,} images but {labels_path} holds {len(labels):,} labels: the files "
            "do not belong together (a truncated or mixed copy); get both from the same source"
        )
    return Subset(images, labels.astype(np.intp))


def _check_count(
    dataset: Declaration, config: str, subset: str, path: Path, found: int, what: str, verified: bool
) -> None:
    """A checked file must hold exactly the pinned count (its header declared at most that)."""
    pinned = dataset.configs[config].count(subset)
    if verified and found != pinned:
        raise MNISTFormatError(
            f"{path} holds {found:,} {what}, but {dataset.title}'s {subset} set has {pinned:,}: it is not "
            f"{dataset.title}'s file. A custom copy needs verify=False (on the command line: --no-verify)"
        )


# -- declaring a dataset of this form, and its map-style class ---------------------------------------------
def declare_idx(
    name: str, title: str, classes: tuple[str, ...], base_urls: tuple[str, ...], pins: Mapping[str, tuple[str, int]]
) -> Declaration:
    """Declare a dataset in this form: its four :data:`FILES` under the first of ``base_urls`` (the others as
    second sources), pinned by ``{file name: (md5, size)}`` (md5 as torchvision pins them and sizes as
    tensorflow-datasets records them), 60,000 train and 10,000 test images of ``classes``."""
    resources = {
        filename: Resource(name, filename, base_urls[0] + filename, f"md5:{md5}", size,
                           more_urls=tuple(base + filename for base in base_urls[1:]))
        for filename, (md5, size) in pins.items()
    }
    return declare(Declaration(name=name, title=title, resources=resources,
                               configs={DEFAULT_CONFIG: Config(classes, (60_000, 10_000))},
                               reader=read_files, default_resize=DEFAULT_METHOD, native_shape=NATIVE_SHAPE))


class MNISTFamilyDataset(ClassFilesDataset):
    """One dataset in MNIST's form as a map-style dataset (see `glyphforge.datasets.classes.load.ClassFilesDataset`).

    Use a subclass (:class:`~glyphforge.datasets.mnist.MNIST`, :class:`~glyphforge.datasets.fashion_mnist.FashionMNIST`,
    :class:`~glyphforge.datasets.kmnist.KMNIST`), which names its dataset: ``MNIST(root=None, train=None,
    transform=None, target_transform=None, download=None, *, subset=None, shape=None, context=None, ...)``,
    torchvision's arguments first.
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
