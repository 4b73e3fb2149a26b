"""The declaration of a per-class dataset (:class:`Declaration`) and the declared datasets (:data:`DECLARATIONS`).

A declaration says what differs from one per-class dataset to another (see
:mod:`glyphforge.datasets.classes.files`): its name, title, pinned resources, configs with
their classes and counts, a reader (returning :class:`Parsed`), the class file names and the
default resize.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from glyphforge.pipelines.resource import Resource

#: The config name of a dataset that has only one.
DEFAULT_CONFIG = "default"


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of a dataset: its classes in label order and its pinned image counts."""

    classes: tuple[str, ...]
    n_images: tuple[int, int]
    """The pinned ``(train, test)`` image counts."""
    first_label: int = 0
    """The upstream label of the first class (EMNIST ``letters``: 1)."""

    def count(self, subset: str) -> int:
        """The pinned number of images of ``subset`` (``"train"`` or ``"test"``)."""
        return self.n_images[0 if subset == "train" else 1]


@dataclasses.dataclass(frozen=True)
class Subset:
    """The test or train images of a config as the upstream files store them (validated by a reader)."""

    images: np.ndarray
    """uint8 ``(n, H, W)``, upright, or transposed when the reader says so."""
    labels: np.ndarray
    """The class index ``0 .. n_classes - 1`` of every image."""

    def by_class(self, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the image indices grouped by class (file order kept), and where each class starts."""
        order = np.argsort(self.labels, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(self.labels, minlength=n_classes))])
        return order, starts


@dataclasses.dataclass(frozen=True)
class Parsed:
    """What a reader returns: a config's test and train images, checked."""

    test: Subset
    train: Subset
    transposed: bool = False
    """The images are stored transposed (EMNIST): ``image.T`` is upright."""


#: ``reader(dataset, config, {resource name: (path, hash checked)}, progress) -> Parsed``; raises on bad files.
Reader = Callable[["Declaration", str, Mapping[str, tuple[Path, bool]], bool], Parsed]


def numbered_file(label: int, name: str) -> str:
    """The class file of class index ``label``: ``class_00.pklz`` ... (plain names whatever the class is called)."""
    return f"class_{label:02d}.pklz"


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A per-class dataset: what differs from one to another (see the module docstring).

    Attributes
    ----------
    name
        The registry name, cache kind and folder of the upstream files (``"fashion-mnist"``).
    title
        How messages call it (``"Fashion-MNIST"``).
    resources
        The pinned upstream files, by name (a key of ``archives=``).
    configs
        The configurations by name, in order: EMNIST's splits; one (:data:`DEFAULT_CONFIG`) for most datasets.
    reader
        Reads and validates the resources of a config (see :data:`Reader`).
    config_option
        The keyword, cache param and ``--`` flag naming a config (EMNIST: ``"split"``); None with one config.
    default_config
        The config when none is given (None: the first).
    class_file
        ``(label, class name) -> file name`` of a class file in an entry.
    default_resize
        The resize method of every resized entry (part of its cache key).
    native_shape
        The shape of the upstream images.
    """

    name: str
    title: str
    resources: Mapping[str, Resource]
    configs: Mapping[str, Config]
    reader: Reader
    config_option: str | None = None
    default_config: str | None = None
    class_file: Callable[[int, str], str] = numbered_file
    default_resize: str = "box"
    native_shape: tuple[int, int] = (28, 28)

    def __post_init__(self) -> None:
        if self.config_option is None and len(self.configs) != 1:
            raise ValueError(f"{self.title} has {len(self.configs)} configs: name its config_option")

    @property
    def ident(self) -> str:
        """The name as a Python identifier, as in ``load_fashion_mnist``."""
        return self.name.replace("-", "_")

    @property
    def config(self) -> str:
        """The default config."""
        return self.default_config or next(iter(self.configs))


#: The declared datasets by name (tests swap one for a copy pinning synthetic files).
DECLARATIONS: dict[str, Declaration] = {}


def declare(dataset: Declaration) -> Declaration:
    """Add ``dataset`` to :data:`DECLARATIONS` (replacing one of the same name); return it."""
    DECLARATIONS[dataset.name] = dataset
    return dataset
