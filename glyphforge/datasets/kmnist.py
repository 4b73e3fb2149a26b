"""Kuzushiji-MNIST (KMNIST), ten cursive Japanese kana in MNIST's form, and its public names.

Declared in MNIST's form (:mod:`glyphforge.datasets.classes.mnist_form`), as MNIST is
(:mod:`glyphforge.datasets.mnist`, where the family's form, classes and cache entries are
described): :data:`DATASET` is its data (name, title, class names and upstream files), and its
public functions are MNIST's bound to it (:func:`~glyphforge.datasets.classes.files.like`).
"""
from __future__ import annotations

from glyphforge.datasets.classes.files import like
from glyphforge.datasets.classes.mnist_form import DEFAULT_METHOD, MNISTFamilyDataset, declare_idx
from glyphforge.datasets.mnist import load_mnist, mnist_classes, mnist_glyph_images, prepare_mnist

__all__ = [
    "DATASET", "DEFAULT_METHOD", "KMNIST", "kmnist_classes", "kmnist_glyph_images", "load_kmnist", "prepare_kmnist",
]

#: KMNIST, declared.
DATASET = declare_idx("kmnist", "KMNIST",
                      ("o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"),
                      ("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",), {
    "train-images-idx3-ubyte.gz": ("bdb82020997e1d708af4cf47b453dcf7", 18_165_135),
    "train-labels-idx1-ubyte.gz": ("e144d726b3acfaa3e44228e80efcd344", 29_497),
    "t10k-images-idx3-ubyte.gz": ("5c965bf0a639b31b8f53240b1b52f4d7", 3_041_136),
    "t10k-labels-idx1-ubyte.gz": ("7320c461ea6c1c855c0b718fb2a4b134", 5_120),
})

prepare_kmnist = like(prepare_mnist, DATASET.name, __name__)
load_kmnist = like(load_mnist, DATASET.name, __name__)
kmnist_classes = like(mnist_classes, DATASET.name, __name__)
kmnist_glyph_images = like(mnist_glyph_images, DATASET.name, __name__)


class KMNIST(MNISTFamilyDataset):
    """Kuzushiji-MNIST's cursive kana as a map-style dataset, e.g. ``KMNIST()``."""

    name = "kmnist"
