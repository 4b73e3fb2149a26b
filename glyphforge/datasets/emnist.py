"""EMNIST: NIST's ``gzip.zip`` declared as a per-class dataset of six splits, and its public names.

All six splits (:data:`SPLITS`: ``byclass``, ``bymerge``, ``balanced``, ``letters``,
``digits``, ``mnist``) are read from the one upstream archive, member by member, without
extracting it (its layout and checks: :mod:`glyphforge.datasets._emnist_archive`).
:data:`DATASET` declares it; everything else is :mod:`glyphforge.datasets._class_files`:
:func:`prepare_emnist` makes cache entries; :func:`load_emnist` and :class:`EMNIST`
read them (preparing them first when they are missing); :func:`preview_examples` and
:func:`glyph_images` (the registry's preview, the glyphs scenes draw) read them and never
prepare anything. The classes of each split and the class file names are described in
:mod:`glyphforge.datasets._emnist_catalog`.

Cache entries
-------------
One entry of kind ``"emnist"`` per ``(split, shape)``, in the format of
:mod:`glyphforge.datasets._class_files`: the params ``{"split", "shape", "source", "layout"}``
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

from collections.abc import Mapping
from pathlib import Path

from glyphforge.datasets import _class_files, _class_load, _class_prepare
from glyphforge.datasets._class_args import SUBSETS, class_names
from glyphforge.datasets._class_declaration import Config, Declaration, Parsed, declare
from glyphforge.datasets._class_load import ClassFilesDataset, config_option_init
from glyphforge.datasets._classes import BLANK
from glyphforge.datasets._emnist_archive import EMNIST_ZIP, N_IMAGES, NATIVE_SHAPE, read_split
from glyphforge.datasets._emnist_catalog import (
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


prepare_emnist = _class_files.bind(_class_prepare.prepare, KIND, "prepare_emnist", __name__)
load_emnist = _class_files.bind(_class_load.load, KIND, "load_emnist", __name__)
emnist_classes = _class_files.bind(class_names, KIND, "emnist_classes", __name__)
glyph_images = _class_files.bind(_class_load.glyph_images, KIND, "glyph_images", __name__)
preview_examples = _class_load.preview


class EMNIST(ClassFilesDataset):
    """One EMNIST split as a map-style dataset, e.g. ``EMNIST(split="digits", subset="test")``.

    ``EMNIST(root=None, split=None, train=None, transform=None, target_transform=None, download=None, *,
    subset=None, shape=None, context=None, ...)`` (``split`` None: ``byclass``), so torchvision's
    ``EMNIST("data", "digits", train=False)`` means the same: the other keywords are
    :class:`~glyphforge.datasets._class_load.ClassFilesDataset`'s.
    """

    name = KIND
    __init__ = config_option_init(DATASET.config_option)

    @property
    def split(self) -> str:
        """The split (the declaration's config)."""
        return self.config
