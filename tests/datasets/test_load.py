"""``glyphforge.load(name, ...)`` over the built-in datasets, offline.

Each dataset is prepared once into one data dir from local files: MNIST and EMNIST from
synthetic files in the upstream layout (:mod:`support.synthetic_mnist`, the session's
synthetic EMNIST zip) given as unverified ``archives=``; Omniglot's real small1 zip and
real background textures from ``../shared/data`` as a ``file://`` mirror. ``gf.load`` must
give exactly what the documented order gives (MNIST), and exactly what each dataset's
own ``load_*`` gives with the same arguments (all of them).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import glyphforge as gf

from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, write_synthetic_mnist


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> SyntheticMNIST:
    return write_synthetic_mnist(tmp_path_factory.mktemp("mnist"), (600, 100), seed=4)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, synthetic, synthetic_emnist) -> Path:
    """MNIST (native and 14x14) and EMNIST digits, from the synthetic files, offline."""
    data_dir = tmp_path_factory.mktemp("data")
    gf.prepare_mnist(archives={file: synthetic.path(file) for file in ALL_FILES}, shapes=[(14, 14)], verify=False,
                     offline=True, progress=False, data_dir=data_dir)
    gf.prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, split="digits", verify=False, offline=True,
                      progress=False, data_dir=data_dir)
    return data_dir


@pytest.fixture(scope="module")
def real_data_dir(tmp_path_factory, shared_data) -> Path:
    """Omniglot small1 and two background textures, from the real files as a file:// mirror, offline."""
    data_dir = tmp_path_factory.mktemp("real")
    gf.prepare_omniglot(sets="small1", mirrors=[shared_data.as_uri()], offline=True, progress=False, data_dir=data_dir)
    gf.prepare_backgrounds(names=["water", "red_x"], mirrors=[shared_data.as_uri()], offline=True, progress=False,
                           data_dir=data_dir)
    return data_dir


def assert_same(got, expected) -> None:
    """Equal loader results: arrays exactly (dtype and shape too), lists and tuples item by item, the rest by ==."""
    assert type(got) is type(expected)
    if isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected)
        for got_item, expected_item in zip(got, expected, strict=True):
            assert_same(got_item, expected_item)
    else:
        assert got == expected


def box(images: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pillow's BOX resize of every image (the MNIST family's documented resize)."""
    return np.stack([np.asarray(Image.fromarray(image).resize(shape[::-1], Image.Resampling.BOX)) for image in images])


def test_mnist_through_load_is_the_documented_selection_and_order(data_dir, synthetic):
    x, y, classes = gf.load("mnist", "3120", subset="test", shape=(14, 14), seed=1, data_dir=data_dir, download=False)
    assert classes == ["0", "1", "2", "3"] and x.dtype == np.uint8 and y.dtype == np.int64
    blocks = [synthetic.class_images(label, "test") for label in range(4)]
    order = np.random.default_rng(1).permutation(sum(map(len, blocks)))
    assert np.array_equal(x, box(np.concatenate(blocks)[order], (14, 14)))
    assert np.array_equal(y, np.repeat(np.arange(4), [len(block) for block in blocks])[order])
    assert_same(gf.load("mnist", "3120", subset="test", shape=(14, 14), seed=1, data_dir=data_dir, download=False),
                gf.load_mnist("3120", subset="test", shape=(14, 14), seed=1, data_dir=data_dir, download=False))


def test_no_classes_means_every_class(data_dir):
    x, y, classes = gf.load("mnist", seed=0, data_dir=data_dir, download=False)
    assert classes == list("0123456789") and len(x) == 600 and sorted(set(y.tolist())) == list(range(10))
    _, _, digits = gf.load("emnist", split="digits", data_dir=data_dir, download=False)
    assert digits == list("0123456789")


def test_emnist_through_load_is_load_emnist(data_dir):
    options = dict(split="digits", subset="all", balance=True, example_range=(0, 0.5), seed=3, data_dir=data_dir,
                   download=False)
    got = gf.load("emnist", "7021", **options)
    assert got[2] == ["0", "1", "2", "7"] and len(got[0]) > 0
    assert_same(got, gf.load_emnist("7021", **options))


def test_omniglot_and_backgrounds_through_load_are_their_loaders(real_data_dir):
    options = dict(sets="small1", shape=(28, 28), seed=7, data_dir=real_data_dir, download=False)
    got = gf.load("omniglot", ["Latin,3", "Korean,1"], **options)
    assert got[2] == ["Korean,1", "Latin,3"] and got[0].shape == (40, 28, 28)
    assert_same(got, gf.load_omniglot(["Latin,3", "Korean,1"], **options))
    textures = gf.load("backgrounds", ["water", "red_x"], shape=(48, 48), data_dir=real_data_dir, download=False)
    assert_same(textures, gf.load_backgrounds(["water", "red_x"], shape=(48, 48), data_dir=real_data_dir,
                                              download=False))


def test_a_dataset_not_prepared_says_what_to_run(data_dir):
    with pytest.raises(FileNotFoundError, match=rf"^KMNIST is not prepared in {data_dir / 'cache'}: run "
                                                r"prepare_kmnist\(\) or `prepare-data kmnist`, or pass download=True$"):
        gf.load("kmnist", data_dir=data_dir, download=False)
