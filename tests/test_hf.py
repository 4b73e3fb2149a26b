"""`glyphforge.hf`: any arrays (names, dtypes, shapes) as a ``datasets.Dataset`` equal row for row, numbers not
copied, names tables as ``ClassLabel``; images as PGM / PPM files for Parquet; a map-style class of the MNIST
family through ``ds.to_hf()``."""
from __future__ import annotations

import dataclasses

import datasets
import numpy as np
import pyarrow as pa
import pytest

from glyphforge import hf
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.fashion_mnist import FashionMNIST, prepare_fashion_mnist
from glyphforge.errors import ArgumentError

from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

N = 23


def odd_arrays() -> dict[str, np.ndarray]:
    """One array of each kind of feature: scalars of every kind, 1-D to 6-D, strings, bytes, a names table's."""
    rng = np.random.default_rng(5)
    return {
        "flag": rng.random(N) > 0.5,
        "half": rng.random(N).astype(np.float16),
        "code": rng.integers(-1, 4, N).astype(np.int16),  # named below: -1 pads
        "codes": rng.integers(-1, 4, (N, 2, 3)).astype(np.uint8) % 4,
        "vector": rng.integers(0, 1000, (N, 5)).astype(np.uint16),
        "grid": rng.random((N, 2, 3, 4, 5)).astype(np.float32),
        "deep": rng.integers(0, 9, (N, 1, 2, 1, 2, 3, 2)),  # 6 dimensions a row: no Array6D, nested lists
        "text": np.array([[f"w{i}", "é" * (i % 3)] for i in range(N)]),
        "raw": np.array([b"x" * (i % 4) for i in range(N)], dtype="S3"),
    }


def test_any_arrays_convert_row_for_row_with_their_features():
    arrays = odd_arrays()
    names = {"code": ["a", "b", "c", "d"], "codes": ["p", "q", "r", "s"]}
    converted = hf.dataset(arrays, names, "odd")
    features = converted.features
    assert features["flag"] == datasets.Value("bool") and features["half"] == datasets.Value("float16")
    assert features["code"] == datasets.ClassLabel(names=["a", "b", "c", "d"])
    assert features["codes"] == datasets.List(datasets.List(datasets.ClassLabel(names=["p", "q", "r", "s"])))
    assert features["vector"] == datasets.List(datasets.Value("uint16"))
    assert features["grid"] == datasets.Array4D((2, 3, 4, 5), "float32")
    assert features["deep"] == datasets.List(datasets.List(datasets.List(datasets.List(datasets.List(datasets.List(
        datasets.Value("int64")))))))
    assert features["text"] == datasets.List(datasets.Value("string"))
    assert features["raw"] == datasets.Value("binary")
    for i, row in enumerate(converted):
        for name, array in arrays.items():
            assert np.array_equal(np.asarray(row[name], array.dtype), array[i]), (name, i)
    assert converted.features["code"].int2str(int(arrays["code"][3])) in names["code"]


def test_numbers_are_not_copied_and_large_arrays_are_cut_into_chunks(monkeypatch):
    arrays = odd_arrays()
    monkeypatch.setattr(hf, "CHUNK_BYTES", 2000)  # a few rows a chunk
    converted = hf.dataset(arrays, {}, "chunks")
    grid = converted.data.column("grid")
    assert grid.num_chunks > 1
    first = grid.chunk(0).storage.values.values.values.values
    assert first.buffers()[1].address == arrays["grid"].ctypes.data
    numpy = converted.with_format("numpy")[:]
    for name in ("grid", "vector", "flag", "half"):
        assert np.array_equal(numpy[name].astype(arrays[name].dtype), arrays[name]), name


def test_images_as_netpbm_files_decode_to_the_same_pixels():
    rng = np.random.default_rng(1)
    for shape in [(5, 7), (5, 7, 3)]:
        images = rng.integers(0, 256, (N, *shape), dtype=np.uint8)
        feature = hf.image_feature(images.dtype, shape)
        assert feature == datasets.Image()
        features = hf.features({"images": (images.dtype, shape)}, {}, "images")
        [batch] = hf.batches({"images": images}, features)
        table = datasets.table.InMemoryTable(pa.Table.from_batches([batch]))
        decoded = datasets.Dataset(table, info=datasets.DatasetInfo(features=features))
        assert all(np.array_equal(np.asarray(row["images"]), image) for row, image in zip(decoded, images, strict=True))
    assert hf.image_feature(np.dtype(np.float32), (5, 7)) is None and hf.image_feature(np.dtype(np.uint8), (5, 7, 4)) \
        is None


def test_an_array_of_objects_is_refused_naming_it():
    with pytest.raises(ArgumentError, match=r"^array 'when' holds object values, which Hugging Face datasets has no "
                                            "feature for"):
        hf.dataset({"when": np.array([object()] * 3)}, {}, "refused")


@pytest.fixture
def fashion(tmp_path, monkeypatch):
    """Fashion-MNIST from synthetic upstream-layout files (600 train, 100 test images), given as an own copy."""
    files = write_synthetic_mnist(tmp_path / "files", (600, 100), seed=2)
    declaration = DECLARATIONS["fashion-mnist"]
    configs = {name: dataclasses.replace(config, n_images=(600, 100)) for name, config in declaration.configs.items()}
    monkeypatch.setitem(DECLARATIONS, "fashion-mnist", dataclasses.replace(declaration, configs=configs))
    prepare_fashion_mnist(archives={name: files.path(name) for name in ALL_FILES}, verify=False,
                          data_dir=tmp_path / "data", progress=False)
    return FashionMNIST(subset="train", data_dir=tmp_path / "data")


def test_a_map_style_class_to_hf_has_the_hubs_columns_and_class_names(fashion):
    converted = fashion.to_hf()
    assert converted.features == datasets.Features({  # the Hub's fashion_mnist
        "image": datasets.Image(), "label": datasets.ClassLabel(names=list(fashion.classes))})
    assert len(converted) == len(fashion) == 600
    for i, row in enumerate(converted):
        image, label = fashion[i]
        assert np.array_equal(np.asarray(row["image"]), image) and row["label"] == label, i
    assert converted.features["label"].int2str(converted[0]["label"]) == fashion.classes[fashion[0][1]]
    labels = converted.data.column("label").chunk(0)
    assert labels.buffers()[1].address == fashion.labels.ctypes.data  # the labels are not copied
    assert converted._fingerprint == fashion.to_hf()._fingerprint  # the same bytes: the same fingerprint


def test_an_image_list_read_lazily_converts_its_images(tmp_path):
    from PIL import Image

    from glyphforge import ImageList

    pixels = np.random.default_rng(3).integers(0, 256, (3, 6, 5), dtype=np.uint8)
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
    images = ImageList([tmp_path / f"{i}.png" for i in range(3)], labels=[2, 0, 1])
    converted = images.to_hf()
    assert converted.features["image"] == datasets.Image()
    assert converted.features["label"] == datasets.Value("int64")  # no names table
    assert [np.array_equal(np.asarray(row["image"]), pixels[i]) and row["label"] == [2, 0, 1][i]
            for i, row in enumerate(converted)] == [True] * 3


@pytest.mark.parametrize(("layout", "columns"), [
    ({"images": (np.uint8, (4, 4)), "labels": (np.int64, ())}, ["image", "label"]),
    ({"labels": (np.int16, ()), "images": (np.float32, (4, 4))}, ["label", "image"]),  # any order, any dtype
    ({"images": (np.uint8, (4, 4, 3))}, ["image"]),  # unlabelled
    ({"images": (np.uint8, (4, 4)), "labels": (np.int64, (3,))}, ["images", "labels"]),  # a label per object
    ({"images": (np.uint8, (4, 4)), "labels": (np.float32, ())}, ["images", "labels"]),  # not a class
    ({"images": (np.uint8, (4, 4)), "labels": (np.int64, ()), "row": (np.int64, ())}, ["images", "labels", "row"]),
], ids=["image+label", "float images", "unlabelled", "label per object", "float label", "three arrays"])
def test_single_image_single_label_columns_are_image_and_label(layout, columns):
    layout = {name: (np.dtype(dtype), shape) for name, (dtype, shape) in layout.items()}
    assert list(hf.column_names(layout, "images").values()) == columns
    arrays = {name: np.zeros((3, *shape), dtype) for name, (dtype, shape) in layout.items()}
    converted = hf.dataset(arrays, {}, "columns", "images")
    assert converted.column_names == columns
    image = converted.features[columns[list(layout).index("images")]]
    images = layout["images"]
    assert image == (datasets.Image() if images[0] == np.uint8 else datasets.Array2D(images[1], "float32"))
