"""The MNIST family's upstream files: which datasets, reading and validating their IDX files, the entries written.

The datasets
------------
:data:`DATASETS` maps each dataset's name (its registry name, cache kind and folder in
``raw/`` and on mirrors: ``"mnist"``, ``"fashion-mnist"``, ``"kmnist"``) to a
:class:`Family` record: its title, its ten classes in label order, its four upstream
files (:class:`~glyphforge.pipelines.download.Resource`: md5 as torchvision pins them,
sizes as tensorflow-datasets records them) and its image counts (60,000 train, 10,000
test). The three datasets differ only in this record; every step below takes it.

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

What is written
---------------
:func:`write_native` writes one file per class, ``class_00.pklz`` ... ``class_09.pklz``
(:func:`class_file_name`: plain names whatever the class is called, so ``T-shirt/top``
makes no folder and case-insensitive filesystems are safe; the class name is kept in the
manifest), holding the class's test images first, then its train images, each in file
order. :func:`write_resized` writes the same files with every image resized.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from glyphforge._checks import MAX_READ_THREADS, worker_count
from glyphforge.cache import Entry, Writer
from glyphforge.datasets._prepare import resized
from glyphforge.pipelines.download import Resource
from glyphforge.pipelines.idx import CountCap, read_images, read_labels

NATIVE_SHAPE = (28, 28)
#: The four upstream files of every dataset of the family: ``{subset: (images file, labels file)}``.
FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: A custom copy (``verify=False``) may hold up to this many times the pinned images of a subset.
COUNT_MARGIN = 1.25


class MNISTFormatError(ValueError):
    """The files' labels or counts do not describe the dataset; the message names the file."""


@dataclasses.dataclass(frozen=True)
class Family:
    """One dataset of the MNIST family (see the module docstring).

    Attributes
    ----------
    name
        The registry name, cache kind and folder of the upstream files (``"fashion-mnist"``).
    title
        How messages call it (``"Fashion-MNIST"``).
    classes
        The class names in label order (label ``i`` is ``classes[i]``).
    resources
        The four upstream files by file name (the names of :data:`FILES`).
    n_images
        The pinned ``(train, test)`` image counts.
    """

    name: str
    title: str
    classes: tuple[str, ...]
    resources: Mapping[str, Resource]
    n_images: tuple[int, int] = (60_000, 10_000)

    @property
    def ident(self) -> str:
        """The name as a Python identifier, as in ``load_fashion_mnist``."""
        return self.name.replace("-", "_")

    def count(self, subset: str) -> int:
        """The pinned number of images of ``subset`` (``"train"`` or ``"test"``)."""
        return self.n_images[0 if subset == "train" else 1]


def _resources(
    dataset: str, base_urls: tuple[str, ...], pins: Mapping[str, tuple[str, int]]
) -> dict[str, Resource]:
    """The four files of ``dataset`` under the first of ``base_urls`` (the others as second sources)."""
    return {
        filename: Resource(dataset, filename, base_urls[0] + filename, f"md5:{md5}", size,
                           more_urls=tuple(base + filename for base in base_urls[1:]))
        for filename, (md5, size) in pins.items()
    }


#: The family, by name. Tests replace a record (e.g. a synthetic copy's md5s and counts).
DATASETS: dict[str, Family] = {
    "mnist": Family(
        name="mnist",
        title="MNIST",
        classes=tuple("0123456789"),
        resources=_resources("mnist", ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                                       "http://yann.lecun.com/exdb/mnist/"), {
            "train-images-idx3-ubyte.gz": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
            "train-labels-idx1-ubyte.gz": ("d53e105ee54ea40749a09fcbcd1e9432", 28_881),
            "t10k-images-idx3-ubyte.gz": ("9fb629c4189551a2d022fa330f9573f3", 1_648_877),
            "t10k-labels-idx1-ubyte.gz": ("ec29112dd5afa0611ce80d1b7f02629c", 4_542),
        }),
    ),
    "fashion-mnist": Family(
        name="fashion-mnist",
        title="Fashion-MNIST",
        classes=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                 "Ankle boot"),
        resources=_resources("fashion-mnist", ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",), {
            "train-images-idx3-ubyte.gz": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26_421_880),
            "train-labels-idx1-ubyte.gz": ("25c81989df183df01b3e8a0aad5dffbe", 29_515),
            "t10k-images-idx3-ubyte.gz": ("bef4ecab320f06d8554ea6380940ec79", 4_422_102),
            "t10k-labels-idx1-ubyte.gz": ("bb300cfdad3c16e7a12a480ee83cd310", 5_148),
        }),
    ),
    "kmnist": Family(
        name="kmnist",
        title="KMNIST",
        classes=("o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"),
        resources=_resources("kmnist", ("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",), {
            "train-images-idx3-ubyte.gz": ("bdb82020997e1d708af4cf47b453dcf7", 18_165_135),
            "train-labels-idx1-ubyte.gz": ("e144d726b3acfaa3e44228e80efcd344", 29_497),
            "t10k-images-idx3-ubyte.gz": ("5c965bf0a639b31b8f53240b1b52f4d7", 3_041_136),
            "t10k-labels-idx1-ubyte.gz": ("7320c461ea6c1c855c0b718fb2a4b134", 5_120),
        }),
    ),
}


def class_file_name(label: int) -> str:
    """Return the entry file of the class of ``label``: ``class_00.pklz`` ... ``class_09.pklz``."""
    return f"class_{label:02d}.pklz"


def count_cap(family: Family, subset: str, verified: bool) -> CountCap:
    """Return the most images (or labels) a ``subset`` file of ``family`` may declare in its header."""
    pinned = family.count(subset)
    if verified:
        return CountCap(pinned, f"{family.title}'s {subset} files hold {pinned:,}, and this file's md5 was checked; "
                                "its header is corrupt: get a good copy")
    return CountCap(
        int(pinned * COUNT_MARGIN),
        f"{family.title} has {pinned:,} {subset} images, and a custom copy (verify=False, --no-verify) may hold at "
        f"most {COUNT_MARGIN:g}x that. The header is corrupt or this is not a {family.title} file: use the upstream "
        f"file (prepare-data {family.name} without --no-verify downloads it)",
    )


# -- reading ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Subset:
    """The train or test images of a dataset as its files hold them (validated)."""

    images: np.ndarray  # uint8 (n, 28, 28), upright
    labels: np.ndarray  # the label 0 .. n_classes - 1 of every image


def read_files(family: Family, files: Mapping[str, tuple[Path, bool]], progress: bool) -> tuple[Subset, Subset]:
    """Read and validate the four files (train and test in parallel); return ``(train, test)``.

    Parameters
    ----------
    family
        The dataset.
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
    with tqdm(total=4, desc=f"{family.title}: reading", unit="file", disable=not progress) as bar, \
            ThreadPoolExecutor(2) as pool:
        train, test = pool.map(lambda subset: _read_subset(family, subset, files, bar), ("train", "test"))
    return train, test


def _read_subset(family: Family, subset: str, files: Mapping[str, tuple[Path, bool]], bar: tqdm) -> Subset:
    """Read one subset's labels and images, checking them against each other and the family."""
    (images_path, images_verified), (labels_path, labels_verified) = (files[name] for name in FILES[subset])
    with open(labels_path, "rb") as stream:
        labels = read_labels(stream, str(labels_path), cap=count_cap(family, subset, labels_verified))
    bar.update()
    _check_count(family, subset, labels_path, len(labels), "labels", labels_verified)
    n_classes = len(family.classes)
    outside = np.unique(labels[labels >= n_classes])
    if outside.size:
        raise MNISTFormatError(
            f"{labels_path} holds labels {outside.tolist()}, but {family.title}'s labels are 0-{n_classes - 1}; "
            f"the file is corrupt or not {family.title}'s"
        )
    with open(images_path, "rb") as stream:
        images = read_images(stream, str(images_path), dims=NATIVE_SHAPE,
                             cap=count_cap(family, subset, images_verified))
    bar.update()
    _check_count(family, subset, images_path, len(images), "images", images_verified)
    if len(images) != len(labels):
        raise MNISTFormatError(
            f"{images_path} holds {len(images):,} images but {labels_path} holds {len(labels):,} labels: the files "
            "do not belong together (a truncated or mixed copy); get both from the same source"
        )
    return Subset(images, labels.astype(np.intp))


def _check_count(family: Family, subset: str, path: Path, found: int, what: str, verified: bool) -> None:
    """A checked file must hold exactly the pinned count (its header declared at most that)."""
    pinned = family.count(subset)
    if verified and found != pinned:
        raise MNISTFormatError(
            f"{path} holds {found:,} {what}, but {family.title}'s {subset} set has {pinned:,}: it is not "
            f"{family.title}'s file. A custom copy needs verify=False (on the command line: --no-verify)"
        )


# -- writing ---------------------------------------------------------------------------
def write_native(
    writer: Writer, family: Family, train: Subset, test: Subset, verified: bool, progress: bool
) -> None:
    """Write one class file per class (its test images, then its train images) and the entry's meta.

    Parameters
    ----------
    writer
        The cache writer of the dataset's 28x28 entry.
    family, train, test
        The dataset and what :func:`read_files` read.
    verified
        Whether the md5 of all four files was checked (recorded as ``meta["verified_files"]``).
    progress
        Show a progress bar.
    """
    n_test = np.bincount(test.labels, minlength=len(family.classes))
    n_train = np.bincount(train.labels, minlength=len(family.classes))

    def write_class(label: int) -> int:
        images = np.concatenate([test.images[test.labels == label], train.images[train.labels == label]])
        writer.write(class_file_name(label), images)
        return len(images)

    n_images = len(train.labels) + len(test.labels)
    bar = tqdm(total=n_images, desc=f"{family.title}: writing 28x28", unit="img", disable=not progress)
    with ThreadPoolExecutor(worker_count(None, cap=MAX_READ_THREADS)) as pool, bar:
        for done in pool.map(write_class, range(len(family.classes))):
            bar.update(done)
    writer.meta.update(
        dataset=family.name,
        shape=list(NATIVE_SHAPE),
        n_images=n_images,
        n_train=len(train.labels),
        n_test=len(test.labels),
        verified_files=verified,
        classes=[
            {"name": name, "label": label, "file": class_file_name(label), "n_test": int(n_test[label]),
             "n_train": int(n_train[label])}
            for label, name in enumerate(family.classes)
        ],
    )


def write_resized(writer: Writer, base: Entry, shape: tuple[int, int], method: str, progress: bool) -> None:
    """Write the resize (``method``, through the numba kernels) of every class file of ``base``, and the meta."""
    records = base.meta["classes"]
    label = f"{base.meta['dataset']}: writing {shape[0]}x{shape[1]}"
    with tqdm(total=base.meta["n_images"], desc=label, unit="img", disable=not progress) as bar:
        for record in records:
            images: np.ndarray = base.load(record["file"])
            writer.write(record["file"], resized(images, shape, method, batch=True))
            bar.update(len(images))
    writer.meta.update({**base.meta, "shape": list(shape), "resized_from": base.key, "resize": method})
