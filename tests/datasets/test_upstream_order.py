"""Upstream's order and label ids (issue 34): row ``i`` is upstream's example ``i``, label ``k`` upstream's class ``k``.

As torchvision and the papers number them: ``MNIST(subset="train")[:1000]`` is not all zeros,
Fashion-MNIST's label 0 is ``T-shirt/top`` and KMNIST's ``o``, through the map-style classes,
``gf.load`` and every ``load_*``. Files are synthetic, in the exact upstream layout
(:mod:`support.synthetic_mnist`: labels in shuffled order, uneven classes, distinct images),
placed in ``raw/`` and used unchecked; an entry of the layout before (no upstream labels)
is not served.
"""
from __future__ import annotations

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.cache import CacheStore
from glyphforge.context import DataContext
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.declaration import DECLARATIONS

from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, write_synthetic_mnist

CLASSES = {gf.MNIST: "mnist", gf.FashionMNIST: "fashion-mnist", gf.KMNIST: "kmnist"}
#: Upstream's class 0 of each dataset, as torchvision and the papers number them.
FIRST = {"mnist": "0", "fashion-mnist": "T-shirt/top", "kmnist": "o"}


@pytest.fixture(scope="module")
def placed(tmp_path_factory) -> tuple[DataContext, dict[str, SyntheticMNIST]]:
    """Each dataset's four files (its own pixels and labels) placed in ``raw/`` and prepared, unchecked, offline."""
    data_dir = tmp_path_factory.mktemp("data")
    context = DataContext.resolve(data_dir=data_dir, offline=True, verify=False, progress=False)
    files = {}
    for seed, name in enumerate(FIRST):
        files[name] = write_synthetic_mnist(data_dir / "raw" / name, (600, 100), seed=10 + seed)
        gf.load(name, context=context, seed=0)  # prepares from the placed files
    return DataContext.resolve(context, download=False), files


@pytest.mark.parametrize("kind", list(CLASSES), ids=list(FIRST))
@pytest.mark.parametrize("subset", ["train", "test"])
def test_row_i_is_upstreams_example_i(placed, kind, subset):
    context, files = placed
    upstream = files[CLASSES[kind]]
    images, labels = upstream.upstream(subset)
    ds = kind(subset=subset, context=context)
    assert ds.classes[0] == FIRST[CLASSES[kind]]
    assert len(ds) == len(images) and np.array_equal(ds.images, images) and np.array_equal(ds.labels, labels)
    for i in (0, 1, len(ds) // 2, len(ds) - 1):
        image, label = ds[i]
        assert np.array_equal(image, images[i]) and label == labels[i]
    first = ds[:50][1]
    assert len(np.unique(first)) > 1, "a slice holds several classes, as upstream's first examples do"


def test_all_is_the_train_examples_then_the_test_examples(placed):
    context, files = placed
    ds = gf.KMNIST(subset="all", context=context)
    images, labels = files["kmnist"].upstream("all")
    assert np.array_equal(ds.images, images) and np.array_equal(ds.labels, labels)
    assert np.array_equal(ds.images[:600], files["kmnist"].train_images)


@pytest.mark.parametrize("name", list(FIRST))
def test_load_labels_are_upstreams(placed, name):
    """``gf.load`` and ``load_*`` shuffle, but label ``k`` is upstream's class ``k``, ``classes`` upstream's order."""
    context, files = placed
    upstream = files[name]
    label_of = {image.tobytes(): int(label) for image, label in zip(*upstream.upstream("all"), strict=True)}
    assert len(label_of) == 700  # the synthetic images are distinct
    for x, y, classes in (gf.load(name, context=context, subset="all", seed=1),
                          getattr(gf, f"load_{name.replace('-', '_')}")(None, subset="all", seed=2, context=context)):
        assert classes == list(DECLARATIONS[name].configs["default"].classes) and classes[0] == FIRST[name]
        assert [label_of[image.tobytes()] for image in x] == y.tolist()


def test_fashion_mnist_and_kmnist_label_zero(placed):
    context, files = placed
    assert gf.FashionMNIST(subset="test", context=context).classes[:2] == ["T-shirt/top", "Trouser"]
    assert gf.KMNIST(subset="test", context=context).classes[:2] == ["o", "ki"]
    _, y, classes = gf.load("fashion-mnist", ["Ankle boot", "T-shirt/top"], context=context, seed=0)
    assert classes == ["T-shirt/top", "Ankle boot"]  # label order, whatever order they were asked in
    assert np.bincount(y).tolist() == [int((files["fashion-mnist"].train_labels == k).sum()) for k in (0, 9)]


def test_a_selection_keeps_upstream_order(placed):
    context, files = placed
    upstream = files["fashion-mnist"]
    ds = gf.FashionMNIST(subset="train", classes=["Bag", "Trouser"], context=context)
    kept = np.isin(upstream.train_labels, [1, 8])
    assert ds.classes == ["Trouser", "Bag"]
    assert np.array_equal(ds.images, upstream.train_images[kept])
    assert np.array_equal(ds.labels, (upstream.train_labels[kept] == 8).astype(np.int64))


def test_an_entry_of_the_layout_before_is_not_served(placed, tmp_path):
    """An entry as glyphforge wrote it before upstream order (no upstream labels, the params without ``layout``)
    is another key: not found, so not read in the wrong order."""
    _, files = placed
    store = CacheStore.for_data_dir(tmp_path)
    dataset = DECLARATIONS["mnist"]
    params = {key: value for key, value in _class_prepare.params(dataset, "default", (28, 28)).items()
              if key != "layout"}

    def write(writer):
        for label in range(10):
            images = files["mnist"].class_images(label)
            writer.write_array(f"class_{label:02d}.pklz", images.shape, images.dtype,
                               lambda out, images=images: np.copyto(out, images))
        writer.meta.update(dataset="mnist", shape=[28, 28], n_images=700, n_train=600, n_test=100, verified=True,
                           classes=[{"name": str(label), "label": label, "file": f"class_{label:02d}.pklz",
                                     "n_test": int((files["mnist"].test_labels == label).sum()),
                                     "n_train": int((files["mnist"].train_labels == label).sum())}
                                    for label in range(10)])

    store.get_or_create("mnist", params, write)
    with pytest.raises(FileNotFoundError, match=r"^MNIST is not prepared in "):
        gf.MNIST(subset="train", data_dir=tmp_path, download=False)
    assert [raw for raw in ALL_FILES if (tmp_path / "raw" / "mnist" / raw).exists()] == []
