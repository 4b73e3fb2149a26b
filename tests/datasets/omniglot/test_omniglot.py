"""Omniglot loading on the real small1/small2 zips: class names, drawers, the dataset object, registry parts."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from glyphforge.cache import CacheStore
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.omniglot.catalog import natural_key
from glyphforge.datasets.omniglot.dataset import (
    N_DRAWERS,
    RESOURCES,
    Omniglot,
    glyph_images,
    load_omniglot,
    omniglot_classes,
    prepare_omniglot,
    preview_examples,
)
from glyphforge.pipelines.resize import resize
from glyphforge.pipelines.resource import DownloadError

SMALL = ("small1", "small2")  # the sets `prepared` (tests/datasets/conftest.py) holds



def entry_of(data_dir: Path, set_name: str, shape: tuple[int, int] = (105, 105), method: str = "area"):
    params = {"set": set_name, "shape": list(shape), "source": RESOURCES[set_name].hash}
    if shape != (105, 105):
        params["resize"] = method
    return CacheStore.for_data_dir(data_dir).get("omniglot", params)


def class_array(data_dir: Path, set_name: str, alphabet: str, number: int) -> np.ndarray:
    """The (20, 105, 105) drawings of one character, from the cache entry."""
    return entry_of(data_dir, set_name).load(f"{alphabet}.pklz")[number - 1]


# -- loading ---------------------------------------------------------------------------------
def test_load_is_class_ordered_then_shuffled_by_the_seed(prepared):
    x, y, classes = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=7, data_dir=prepared)
    assert isinstance(classes, ClassNames) and classes == ["Korean,1", "Latin,3", "Latin,10"]  # sorted naturally
    stack = np.concatenate([class_array(prepared, "small1", "Korean", 1), class_array(prepared, "small1", "Latin", 3),
                            class_array(prepared, "small1", "Latin", 10)])
    order = np.random.default_rng(7).permutation(60)
    np.testing.assert_array_equal(x, stack[order])
    np.testing.assert_array_equal(y, np.repeat(np.arange(3), 20)[order])
    assert x.dtype == np.uint8 and y.dtype == np.int64
    x2, y2, _ = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=7, data_dir=prepared)
    np.testing.assert_array_equal(x2, x)
    _, y3, _ = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=8, data_dir=prepared)
    assert not np.array_equal(y3, y)


def test_class_names_are_the_list_the_labels_index(prepared):
    _, y, classes = load_omniglot(["Latin,3", "Korean,1"], sets="small1", include_blank=True, seed=0,
                                  data_dir=prepared)
    assert classes == ["Korean,1", "Latin,3", " "] and classes[int(y[0])] in classes
    assert classes.index("Latin,3") == 1 and "Korean,1" in classes and len(classes) == 3
    assert classes.mapping() == {"Korean,1": 0, "Latin,3": 1, " ": 2}


def test_indices_blank_and_one_hot(prepared):
    x, y, classes = load_omniglot(["Greek,2"], sets="small2", indices=[19, 0, 5], include_blank=True,
                                  one_hot=True, seed=1, data_dir=prepared)
    assert classes == ["Greek,2", " "]
    assert x.shape == (6, 105, 105)
    assert y.dtype == np.float32 and y.shape == (6, 2)
    np.testing.assert_array_equal(y.sum(axis=1), np.ones(6))
    labels = y.argmax(axis=1)
    drawings = class_array(prepared, "small2", "Greek", 2)[[19, 0, 5]]
    expected = np.concatenate([drawings, np.zeros((3, 105, 105), np.uint8)])
    order = np.random.default_rng(1).permutation(6)
    np.testing.assert_array_equal(x, expected[order])
    np.testing.assert_array_equal(labels, np.array([0, 0, 0, 1, 1, 1])[order])


@pytest.mark.parametrize(
    ("example_range", "drawers"),
    [((0, 0.5), range(0, 10)), ((0.5, 1), range(10, 20)), ((0.1, 0.26), [2, 3, 4]), ((0.95, 1.0), [19]),
     (None, range(20))],
)
def test_example_range_takes_the_drawers_int_a20_to_int_b20(prepared, example_range, drawers):
    classes = ["Latin,3", "Korean,1"]
    x, y, names = load_omniglot(classes, sets="small1", example_range=example_range, include_blank=True, seed=5,
                                data_dir=prepared)
    drawers = list(drawers)
    stack = np.concatenate([class_array(prepared, "small1", "Korean", 1)[drawers],
                            class_array(prepared, "small1", "Latin", 3)[drawers],
                            np.zeros((len(drawers), 105, 105), np.uint8)])
    order = np.random.default_rng(5).permutation(3 * len(drawers))
    np.testing.assert_array_equal(x, stack[order])
    np.testing.assert_array_equal(y, np.repeat(np.arange(3), len(drawers))[order])
    assert names == ["Korean,1", "Latin,3", " "]
    same, _, _ = load_omniglot(classes, sets="small1", indices=drawers, include_blank=True, seed=5, data_dir=prepared)
    np.testing.assert_array_equal(same, x)  # the same as listing the drawers


def test_adjacent_example_ranges_partition_the_drawers(prepared):
    cuts = [0, 0.13, 0.5, 0.71, 0.9, 1]
    parts = [Omniglot(classes=["Tagalog,4"], sets="small2", example_range=(a, b), data_dir=prepared).images
             for a, b in itertools.pairwise(cuts)]
    assert [len(part) for part in parts] == [2, 8, 4, 4, 2]
    np.testing.assert_array_equal(np.concatenate(parts), class_array(prepared, "small2", "Tagalog", 4))
    assert N_DRAWERS == 20


def test_all_classes_of_a_set(prepared):
    x, y, classes = load_omniglot(sets="small1", seed=0, data_dir=prepared)
    assert x.shape == (136 * 20, 105, 105)
    assert classes == sorted(classes, key=natural_key) and len(classes) == 136
    np.testing.assert_array_equal(np.bincount(y), np.full(136, 20))
    assert omniglot_classes("small1", data_dir=prepared) == classes


def test_classes_are_sorted_naturally(prepared):
    latin = [name for name in omniglot_classes("small1", data_dir=prepared) if name.startswith("Latin,")]
    assert latin == [f"Latin,{number}" for number in range(1, 27)]  # "Latin,2" before "Latin,10"
    ds = Omniglot(sets="small1", classes=["Latin,10", "Latin,2", "Latin,1"], indices=[0], data_dir=prepared)
    assert ds.classes == ["Latin,1", "Latin,2", "Latin,10"] and ds.labels.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(ds.images[1], class_array(prepared, "small1", "Latin", 2)[0])
    assert natural_key("small1/Latin,9") < natural_key("small1/Latin,10") < natural_key("small2/Latin,1")


def test_subset_names_lakes_sets(tmp_path, prepared):
    for subset, sets in (("train", ["background"]), ("test", ["evaluation"]), ("all", ["background", "evaluation"])):
        with pytest.raises(FileNotFoundError, match=rf"^Omniglot sets {re.escape(str(sets))} are not prepared"):
            Omniglot(subset=subset, data_dir=tmp_path, download=False)
        if subset != "all":  # torchvision's spelling of the same sets
            with pytest.raises(FileNotFoundError, match=rf"^Omniglot sets {re.escape(str(sets))} are not prepared"):
                Omniglot(tmp_path, background=subset == "train", download=False)
    with pytest.raises(ValueError, match=r"^give subset='train' \(the sets background\) or sets='small1', not both"):
        Omniglot(subset="train", sets="small1", data_dir=prepared)
    with pytest.raises(ValueError, match=r"^subset \['Latin,1'\] is invalid: use one of all, train, test, or "
                                         r"sets=\.\.\. for other sets \(classes are given as classes=\.\.\.\)"):
        Omniglot(subset=["Latin,1"], sets="small1", data_dir=prepared)


def test_shared_alphabets_are_qualified_never_merged(prepared):
    names = omniglot_classes(SMALL, data_dir=prepared)
    assert len(names) == 136 + 156
    qualified = [name for name in names if "/" in name]
    assert len(qualified) == 2 * (24 + 26)
    assert "small1/Latin,3" in names and "small2/Latin,3" in names and "Latin,3" not in names
    assert "Korean,1" in names and "small1/Korean,1" not in names
    with pytest.raises(ValueError, match=r"'Latin,3' is ambiguous.*'small1/Latin,3' or 'small2/Latin,3'"):
        load_omniglot(["Latin,3"], sets=SMALL, data_dir=prepared)
    x, y, classes = load_omniglot(["small2/Latin,3", "small1/Latin,3", "small1/Korean,1"], sets=SMALL, seed=0,
                                  data_dir=prepared)
    assert classes == ["Korean,1", "small1/Latin,3", "small2/Latin,3"]
    latin1, latin2 = (class_array(prepared, name, "Latin", 3) for name in SMALL)
    np.testing.assert_array_equal(latin1, latin2)  # the same drawings in both zips: kept as two classes
    stack = np.concatenate([class_array(prepared, "small1", "Korean", 1), latin1, latin2])
    order = np.random.default_rng(0).permutation(60)
    np.testing.assert_array_equal(x, stack[order])
    np.testing.assert_array_equal(y, np.repeat(np.arange(3), 20)[order])
    with pytest.raises(ValueError, match="alphabet Korean is in the selected sets small1 only"):
        load_omniglot(["small2/Korean,1"], sets=SMALL, data_dir=prepared)
    # one set alone: bare names, and the qualified form means the same class
    assert load_omniglot(["small2/Latin,3"], sets="small2", data_dir=prepared)[2] == ["Latin,3"]


@pytest.mark.parametrize(
    ("classes", "options", "message"),
    [
        (["Klingon,1"], {}, r"unknown Omniglot alphabet 'Klingon': the known ones are Balinese, Early_Aramaic, "
                           r"Greek, Korean, Latin in sets small1"),
        (["Latin,27"], {}, r"Latin in set small1 has characters 1 to 26; character 27 does not exist"),
        (["Latin,0"], {}, r"has characters 1 to 26; character 0"),
        (["Latin3"], {}, r"class 'Latin3' is not understood: write '<alphabet>,<character number>'"),
        ([3], {}, r"class 3 is not understood"),
        ([], {}, r"classes is empty"),
        (["Latin,3"], {"indices": [0, 20]}, r"drawer indices \[20\] are outside 0-19"),
        (["Latin,3"], {"indices": [-1]}, r"drawer indices \[-1\] are outside 0-19"),
        (["Latin,3"], {"indices": []}, r"indices is empty"),
        (["Latin,3"], {"indices": [1.5]}, r"must be drawer numbers"),
        (["Latin,3"], {"indices": [0], "example_range": (0, 0.5)},
         r"give indices \(the drawers 0-19 themselves\) or example_range .*, not both"),
        (["Latin,3"], {"example_range": (0.5, 0.52)},
         r"example_range \(0.5, 0.52\) holds none of the 20 drawers of a character .* widen it, at least 0.05"),
        (["Latin,3"], {"example_range": (0.5, 0.5)}, r"example_range \(0.5, 0.5\) is invalid: give \(a, b\) with 0"),
        (["Latin,3"], {"example_range": (0, 1.5)}, r"example_range \(0, 1.5\) is invalid"),
        (["Latin,3"], {"example_range": 0.5}, r"example_range 0.5 is invalid"),
        (["Latin,3"], {"sets": ("small1", "small3")}, r"unknown Omniglot sets 'small3': the known ones are "
                                                      r"background, evaluation, small1, small2"),
        (["Latin,3"], {"sets": ()}, r"sets is empty"),
        (["Latin,3"], {"shape": (28, 0)}, r"shape \(28, 0\) is invalid"),
        (["Latin,3"], {"shape": (28, 28), "method": "cubic"}, r"resize method 'cubic' is unknown"),
    ],
)
def test_bad_load_arguments(prepared, classes, options, message):
    with pytest.raises(ValueError, match=message):
        load_omniglot(classes, **{"sets": "small1", "data_dir": prepared, "download": False, **options})
    with pytest.raises(ValueError, match=message):
        Omniglot(classes=classes, **{"sets": "small1", "data_dir": prepared, "download": False, **options})


def test_load_prepares_when_allowed_and_refuses_otherwise(shared_data, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Omniglot sets \['small2'\] are not prepared.*prepare_omniglot"):
        load_omniglot(["Tagalog,1"], sets="small2", data_dir=tmp_path, download=False)
    assert not (tmp_path / "raw").exists()
    x, y, classes = load_omniglot(["Tagalog,1"], sets="small2", data_dir=tmp_path, mirrors=[shared_data.as_uri()])
    assert x.shape == (20, 105, 105) and classes == ["Tagalog,1"]
    # a resized variant is made from the cached 105x105 entry, even without download
    x, _, _ = load_omniglot(["Tagalog,1"], sets="small2", shape=(14, 14), data_dir=tmp_path, download=False)
    assert x.shape == (20, 14, 14)


@pytest.mark.parametrize("loader", [
    lambda data_dir: omniglot_classes("small1", data_dir=data_dir, offline=True),
    lambda data_dir: load_omniglot(["Latin,1"], sets="small1", data_dir=data_dir, offline=True),
    lambda data_dir: Omniglot(classes=["Latin,1"], sets="small1", data_dir=data_dir, offline=True),
])
def test_offline_reaches_every_loader(tmp_path, loader):
    placed = tmp_path / "raw" / "omniglot" / "images_background_small1.zip"
    with pytest.raises(DownloadError, match=rf"(?s)Offline mode.*place the file at:\n  {re.escape(str(placed))}"):
        loader(tmp_path)


def test_dataset_object_in_class_order(prepared):
    ds = Omniglot(classes=["Latin,2", "Greek,1"], sets="small2", indices=[3, 4], include_blank=True,
                  transform=lambda image: image[:2], data_dir=prepared, download=False)
    assert isinstance(ds.classes, ClassNames) and ds.classes == ["Greek,1", "Latin,2", " "]
    assert len(ds) == 6 and ds.images.shape == (6, 105, 105)
    expected = np.concatenate([class_array(prepared, "small2", "Greek", 1)[[3, 4]],
                               class_array(prepared, "small2", "Latin", 2)[[3, 4]], np.zeros((2, 105, 105), np.uint8)])
    np.testing.assert_array_equal(ds.images, expected)
    np.testing.assert_array_equal(ds.labels, [0, 0, 1, 1, 2, 2])
    image, label = ds[2]
    assert image.shape == (2, 105) and label == 1  # the transform applies to ds[i]
    seen = np.concatenate([labels for _, labels in ds.batches(batch_size=4, shuffle=True, seed=0)])
    np.testing.assert_array_equal(np.sort(seen), ds.labels)
    assert repr(ds) == "Omniglot(sets=('small2',), shape=(105, 105), 6 images, 3 classes)"
    ranged = Omniglot(classes=["Latin,2"], sets="small2", example_range=(0.75, 1), data_dir=prepared, download=False)
    np.testing.assert_array_equal(ranged.images, class_array(prepared, "small2", "Latin", 2)[15:])


# -- registry parts ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(105, 105), (28, 28)])
def test_preview_examples_reads_the_entry(prepared, shape):
    prepare_omniglot(sets="small1", shapes=[shape], data_dir=prepared, progress=False)
    entry = entry_of(prepared, "small1", shape)
    images, labels = preview_examples(entry, 6, np.random.default_rng(4), prepared)
    assert images.shape == (6, *shape) and images.dtype == np.uint8
    assert len(set(labels)) == 6 and set(labels) <= set(omniglot_classes("small1", data_dir=prepared))
    rng = np.random.default_rng(4)  # what the picks are: 6 classes, then one drawer shared by all
    rng.choice(136, 6, replace=False)
    drawer = int(rng.integers(20))
    for image, label in zip(images, labels, strict=True):
        alphabet, number = label.split(",")
        drawing = class_array(prepared, "small1", alphabet, int(number))[drawer]
        np.testing.assert_array_equal(image, drawing if shape == (105, 105) else resize(drawing, shape, method="area"))
    again, same = preview_examples(entry, 6, np.random.default_rng(4), prepared)
    np.testing.assert_array_equal(again, images)
    assert same == labels
    few, names = preview_examples(entry, 200, np.random.default_rng(0), prepared)
    assert len(few) == len(names) == 136  # at most one image per class


def test_glyph_images_equal_the_box_load_without_touching_the_cache(prepared):
    classes, size = ["Latin,3", "Korean,1", "Greek,24"], (21, 17)
    assert entry_of(prepared, "small1", size, "box") is None
    images, labels, names = glyph_images(classes, example_range=(0.5, 1), shape=size, data_dir=prepared,
                                         sets=("small1",))
    assert entry_of(prepared, "small1", size, "box") is None  # resized from the 105x105 entry, nothing written
    assert images.shape == (30, 21, 17) and labels.dtype == np.int64 and names == ["Greek,24", "Korean,1", "Latin,3"]
    x, y, expected_names = load_omniglot(classes, sets=("small1",), indices=list(range(10, 20)), seed=0, shape=size,
                                         method="box", data_dir=prepared, download=False)  # makes the box variant
    np.testing.assert_array_equal(images, x)
    np.testing.assert_array_equal(labels, y)
    assert names == expected_names
    cached = glyph_images(classes, example_range=(0.5, 1), shape=size, data_dir=prepared, sets=("small1",))
    np.testing.assert_array_equal(cached[0], x)  # read from the box variant now that it exists
    np.testing.assert_array_equal(cached[1], y)


def test_glyph_images_of_every_class_at_native_size(prepared):
    images, labels, names = glyph_images(None, example_range=None, shape=None, data_dir=prepared, sets=SMALL)
    x, y, expected = load_omniglot(sets=SMALL, seed=0, data_dir=prepared, download=False)
    assert names == expected and len(names) == 136 + 156
    np.testing.assert_array_equal(images, x)
    np.testing.assert_array_equal(labels, y)


def test_glyph_images_never_prepare(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Omniglot sets \['small1', 'small2'\] are not prepared in .*: run "
                                                r".*`prepare-data omniglot --omniglot-sets small1 small2` first"):
        glyph_images(["Latin,1"], example_range=(0, 0.5), shape=(14, 14), data_dir=tmp_path, sets=SMALL)
    assert not (tmp_path / "raw").exists() and CacheStore.for_data_dir(tmp_path).ls() == []
    with pytest.raises(ValueError, match=r"holds none of the 20 drawers"):
        glyph_images(["Latin,1"], example_range=(0.5, 0.52), shape=(14, 14), data_dir=tmp_path, sets=SMALL)
