"""EMNIST: NIST's ``gzip.zip`` declared as a per-class dataset of six splits, and its public names.

All six splits (:data:`SPLITS`: ``byclass``, ``bymerge``, ``balanced``, ``letters``,
``digits``, ``mnist``) are read from the one upstream archive, member by member, without
extracting it (its layout and checks: :mod:`glyphforge.datasets.emnist_archive`).
:data:`DATASET` declares it; everything else is :mod:`glyphforge.datasets.classes.files`, which the public
functions call with the declaration: :func:`prepare_emnist` makes cache entries; :func:`load_emnist` and :class:`EMNIST`
read them (preparing them first when they are missing); :func:`preview_examples` and
:func:`glyph_images` (the registry's preview, the glyphs scenes draw) read them and never
prepare anything. The classes of each split and the class file names are described in
:mod:`glyphforge.datasets.emnist_catalog`.

Cache entries
-------------
One entry of kind ``"emnist"`` per ``(split, shape)``, in the format of
:mod:`glyphforge.datasets.classes.files`: the params ``{"split", "shape", "source", "layout"}``
(``source``: the pinned hash of :data:`EMNIST_ZIP`) and, for any shape but 28x28,
``"resize": "box"``. ``shape=(28, 28)`` is converted from the archive, any other shape
is the box resize (Pillow's ``BOX``, exactly) of every image of the 28x28 entry. An
entry holds one ``.pklz`` per class: the uint8 array ``(n_images_of_class, H, W)``,
upright, white strokes on black, with that class's *test* images first and then its
*train* images, each in archive order; ``upstream_labels.pklz`` holds the class index of every
test example, then of every train example, in archive order (the params hold
``"layout": 2``). ``entry.meta`` holds ``dataset``, ``split``,
``shape``, ``n_images``, ``n_train``, ``n_test``, ``verified`` and ``classes``: one
record per class in label order, ``{"name", "label", "file", "n_test", "n_train"}``
(``label``: NIST's, from 1 for ``letters``). Class files are named ``digit_0.pklz``,
``upper_A.pklz``, ``lower_a.pklz`` (:func:`class_file_name`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from glyphforge._checks import PathLike
from glyphforge.cache import Entry
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets.class_names import BLANK, ClassNames
from glyphforge.datasets.classes import load as _class_load
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.args import SUBSETS, class_names
from glyphforge.datasets.classes.declaration import DECLARATIONS, Config, Declaration, Parsed, declare
from glyphforge.datasets.classes.files import documented
from glyphforge.datasets.classes.load import ClassFilesDataset, config_option_init
from glyphforge.datasets.emnist_archive import EMNIST_ZIP, N_IMAGES, NATIVE_SHAPE, read_split
from glyphforge.datasets.emnist_catalog import (
    CLASSES,
    DEFAULT_SPLIT,
    SPLITS,
    EMNISTFormatError,
    class_file_name,
    first_label,
)

__all__ = [
    "BLANK", "DATASET", "DEFAULT_METHOD", "DEFAULT_SPLIT", "EMNIST", "EMNISTFormatError", "EMNIST_ZIP", "KIND",
    "NATIVE_SHAPE", "SPLITS", "SUBSETS", "class_file_name", "emnist_classes", "glyph_images", "load_emnist",
    "prepare_emnist", "preview_examples",
]

KIND = "emnist"
#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


def _read(dataset: Declaration, split: str, files: Mapping[str, tuple[Path, bool]], progress: bool) -> Parsed:
    """The reader: the split's members of the one archive."""
    return read_split(files[EMNIST_ZIP.filename][0], split, progress)


def _class_file(label: int, char: str) -> str:
    return class_file_name(char)


#: EMNIST, declared (see the module docstring).
DATASET = declare(Declaration(
    name=KIND,
    title="EMNIST",
    resources={EMNIST_ZIP.filename: EMNIST_ZIP},
    configs={split: Config(tuple(CLASSES[split]), N_IMAGES[split], first_label(split)) for split in SPLITS},
    reader=_read,
    config_option="split",
    default_config=DEFAULT_SPLIT,
    class_file=_class_file,
    default_resize=DEFAULT_METHOD,
    native_shape=NATIVE_SHAPE,
))


@documented(_class_prepare.prepare, KIND)
def prepare_emnist(
    *,
    split: str | Iterable[str] | None = None,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert EMNIST splits, and make resized variants."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)
    return _class_prepare.prepare(DECLARATIONS[KIND], config=split, shapes=shapes, archives=archives, context=context)


@documented(_class_load.load, KIND)
def load_emnist(
    classes: Iterable[str | int] | str | None = None,
    *,
    split: str | None = None,
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
    """Load EMNIST images of some classes, shuffled, reading only those classes' files."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    return _class_load.load(DECLARATIONS[KIND], classes, config=split, subset=subset, balance=balance,
                            include_blank=include_blank, shape=shape, n_examples=n_examples,
                            example_range=example_range, seed=seed, context=context)


@documented(class_names, KIND)
def emnist_classes(split: str | None = None) -> list[str]:
    """Return the class names of an EMNIST split in label order (no download needed)."""
    return class_names(DECLARATIONS[KIND], split)


@documented(_class_load.glyph_images, KIND)
def glyph_images(
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    split: str | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the EMNIST glyph images scenes draw, reading the cache only."""
    context = DataContext.resolve(context, data_dir=data_dir)
    return _class_load.glyph_images(DECLARATIONS[KIND], classes, example_range=example_range, shape=shape, config=split,
                                    context=context)


preview_examples = _class_load.preview


class EMNIST(ClassFilesDataset):
    """One EMNIST split as a map-style dataset, e.g. ``EMNIST(split="digits", subset="test")``.

    ``EMNIST(root=None, split=None, train=None, transform=None, target_transform=None, download=None, *,
    subset=None, shape=None, context=None, ...)`` (``split`` None: ``byclass``), so torchvision's
    ``EMNIST("data", "digits", train=False)`` means the same: the other keywords are
    :class:`~glyphforge.datasets.classes.load.ClassFilesDataset`'s.
    """

    name = KIND
    if TYPE_CHECKING:  # what config_option_init makes, for type checkers (tests/test_typing.py checks it)
        def __init__(
            self,
            root: PathLike | None = None,
            split: str | None = None,
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
        __init__ = config_option_init(DATASET.config_option)

    @property
    def split(self) -> str:
        """The split (the declaration's config)."""
        return self.config
