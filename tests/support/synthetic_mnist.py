"""Synthetic MNIST-family files in the upstream layout (MNIST, Fashion-MNIST and KMNIST share it), for tests.

:func:`write_synthetic_mnist` writes the four files every dataset of the family has into
one directory: ``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``,
``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``, each one gzip member
(level 6, mtime 0) of an IDX file: magic 2051 then count, 28, 28 and the uint8 images
stored **upright** (unlike EMNIST's transposed ones), or magic 2049 then count and one
uint8 label per image. Every class is in both subsets, in uneven numbers, in shuffled
order. Pixels are a few bright bars on black (every image has ink, almost surely no two
alike). The first test image is :data:`support.synthetic_emnist.ASYMMETRIC_GLYPH`, so
orientation is checked against a picture.

:func:`idx_file` makes one such file from arrays, for corrupt variants.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support.synthetic_emnist import ASYMMETRIC_GLYPH, class_counts, gzip_bytes, idx_header

#: ``{subset: (images file, labels file)}``, as upstream names them.
FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
ALL_FILES = (*FILES["train"], *FILES["test"])


@dataclass
class SyntheticMNIST:
    """What :func:`write_synthetic_mnist` wrote: the directory, each file's md5 and size, and the arrays."""

    directory: Path
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    md5: dict[str, str] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.directory / name

    def data(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def class_images(self, label: int, subset: str = "all") -> np.ndarray:
        """The images of ``label`` in the order glyphforge stores a class: its test images, then its train images."""
        test = self.test_images[self.test_labels == label]
        train = self.train_images[self.train_labels == label]
        return {"all": np.concatenate([test, train]), "test": test, "train": train}[subset]

    def upstream(self, subset: str) -> tuple[np.ndarray, np.ndarray]:
        """The images and labels of ``subset`` in upstream order (``"all"``: the train examples, then the test ones)."""
        pairs = {"train": [(self.train_images, self.train_labels)], "test": [(self.test_images, self.test_labels)]}
        chosen = pairs.get(subset, pairs["train"] + pairs["test"])
        return np.concatenate([images for images, _ in chosen]), np.concatenate([labels for _, labels in chosen])


def idx_file(images: np.ndarray | None = None, labels: np.ndarray | None = None, *, count: int | None = None) -> bytes:
    """Return a gzipped IDX image file (``images``, ``(n, rows, cols)``) or label file (``labels``).

    ``count`` makes the header declare another count than the array holds (a lying header).
    """
    if images is not None:
        n, rows, cols = images.shape
        return gzip_bytes(idx_header(2051, n if count is None else count, rows, cols) + images.tobytes())
    assert labels is not None
    return gzip_bytes(idx_header(2049, len(labels) if count is None else count) + labels.astype(np.uint8).tobytes())


def _bars(n: int, rng: np.random.Generator) -> np.ndarray:
    images = np.zeros((n, 28, 28), np.uint8)
    for image in images:
        for _ in range(int(rng.integers(2, 5))):
            top, left = rng.integers(2, 22, 2)
            height, width = rng.integers(2, 8, 2)
            image[top:top + height, left:left + width] = rng.integers(60, 256)
    return images


def write_synthetic_mnist(
    directory: str | Path, counts: tuple[int, int] = (600, 100), *, seed: int = 0, n_classes: int = 10
) -> SyntheticMNIST:
    """Write the four files into ``directory`` (created) and return what they hold.

    Parameters
    ----------
    directory
        Where to write them.
    counts
        ``(n_train, n_test)``.
    seed
        Seeds every choice: the same arguments write the same bytes.
    n_classes
        Labels are ``0 .. n_classes - 1``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = {}
    for subset, n in zip(("train", "test"), counts, strict=True):
        labels = rng.permutation(np.repeat(np.arange(n_classes), class_counts(n, n_classes))).astype(np.uint8)
        images = _bars(n, rng)
        if subset == "test":
            images[0] = ASYMMETRIC_GLYPH
        arrays[subset] = images, labels
        images_file, labels_file = FILES[subset]
        (directory / images_file).write_bytes(idx_file(images))
        (directory / labels_file).write_bytes(idx_file(labels=labels))
    result = SyntheticMNIST(directory, *arrays["train"], *arrays["test"])
    for name in ALL_FILES:
        data = result.data(name)
        result.md5[name], result.size[name] = hashlib.md5(data).hexdigest(), len(data)
    return result


def with_counts(declaration, n_images):
    """``declaration`` pinning the image counts ``n_images`` (train, test) instead of upstream's."""
    return dataclasses.replace(declaration, configs={name: dataclasses.replace(config, n_images=n_images)
                                                     for name, config in declaration.configs.items()})


def pinned(declaration, files: SyntheticMNIST, n_images: tuple[int, int]):
    """``declaration`` pinning ``files``' md5s and sizes and the counts ``n_images``; its origin a ``file://`` URL
    that does not exist, so no test reaches the network."""
    resources = {
        file: dataclasses.replace(resource, url=(files.directory / "no-origin" / file).as_uri(),
                                  hash=f"md5:{files.md5[file]}", size=files.size[file])
        for file, resource in declaration.resources.items()
    }
    return with_counts(dataclasses.replace(declaration, resources=resources), n_images)


def mnist_family() -> dict:
    """The MNIST family's declarations as glyphforge ships them, by name (upstream md5s and counts)."""
    from glyphforge.datasets import fashion_mnist, kmnist, mnist

    return {module.DATASET.name: module.DATASET for module in (mnist, fashion_mnist, kmnist)}
