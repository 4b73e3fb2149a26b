"""Fashion-MNIST, Zalando's clothes and shoes in MNIST's form (10 classes), and its public names.

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
    "DATASET", "DEFAULT_METHOD", "FashionMNIST", "fashion_mnist_classes", "fashion_mnist_glyph_images",
    "load_fashion_mnist", "prepare_fashion_mnist",
]

#: Fashion-MNIST, declared.
DATASET = declare_idx("fashion-mnist", "Fashion-MNIST",
                      ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                       "Ankle boot"),
                      ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",), {
    "train-images-idx3-ubyte.gz": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26_421_880),
    "train-labels-idx1-ubyte.gz": ("25c81989df183df01b3e8a0aad5dffbe", 29_515),
    "t10k-images-idx3-ubyte.gz": ("bef4ecab320f06d8554ea6380940ec79", 4_422_102),
    "t10k-labels-idx1-ubyte.gz": ("bb300cfdad3c16e7a12a480ee83cd310", 5_148),
})

prepare_fashion_mnist = like(prepare_mnist, DATASET.name, __name__)
load_fashion_mnist = like(load_mnist, DATASET.name, __name__)
fashion_mnist_classes = like(mnist_classes, DATASET.name, __name__)
fashion_mnist_glyph_images = like(mnist_glyph_images, DATASET.name, __name__)


class FashionMNIST(MNISTFamilyDataset):
    """Fashion-MNIST's clothes as a map-style dataset, e.g. ``FashionMNIST(subset="test")``."""

    name = "fashion-mnist"
