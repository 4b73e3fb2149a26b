"""Omniglot on the real small1/small2 zips: conversion, class names, loading, episodes, bad input."""
from __future__ import annotations

import io
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.http_server import http_server  # noqa: F401 (fixture)

from glyphforge.cache import CacheStore
from glyphforge.datasets._omniglot_archive import PARALLEL_MIN_IMAGES, worker_count
from glyphforge.datasets.omniglot import (
    RESOURCES,
    Omniglot,
    OmniglotFormatError,
    load_omniglot,
    omniglot_classes,
    omniglot_episodes,
    prepare_omniglot,
)
from glyphforge.pipelines.download import DownloadError, HashMismatchError
from glyphforge.pipelines.hashes import check_hash
from glyphforge.pipelines.resize import resize

SMALL = ("small1", "small2")
ALPHABETS = {
    "small1": {"Balinese": 24, "Early_Aramaic": 22, "Greek": 24, "Korean": 40, "Latin": 26},
    "small2": {"Greek": 24, "Japanese_(katakana)": 47, "Latin": 26, "Sanskrit": 42, "Tagalog": 17},
}
MEMBER = re.compile(r"^[^/]+/([^/]+)/character(\d+)/(\d+)_(\d+)\.png$")


def zip_of(shared_data: Path, set_name: str) -> Path:
    return shared_data / "omniglot" / RESOURCES[set_name].filename


@pytest.fixture(scope="module")
def prepared(shared_data, tmp_path_factory) -> Path:
    """A data dir with small1 and small2 converted from the file:// mirror."""
    data_dir = tmp_path_factory.mktemp("omniglot")
    prepare_omniglot(sets=SMALL, data_dir=data_dir, mirrors=[shared_data.as_uri()], progress=False)
    return data_dir


def native(data_dir: Path, set_name: str):
    entry = CacheStore.for_data_dir(data_dir).get("omniglot", {
        "set": set_name, "shape": [105, 105], "source": RESOURCES[set_name].hash,
    })
    assert entry is not None
    return entry


def class_array(data_dir: Path, set_name: str, alphabet: str, number: int) -> np.ndarray:
    """The (20, 105, 105) drawings of one character, from the cache entry."""
    return native(data_dir, set_name).load(f"{alphabet}.pklz")[number - 1]


# -- registry and conversion -------------------------------------------------------------
def test_registry_pins_the_real_zips(shared_data):
    for set_name in SMALL:
        resource = RESOURCES[set_name]
        assert resource.hash.startswith("sha256:")
        assert check_hash(zip_of(shared_data, set_name), resource.hash)[0]
        assert zip_of(shared_data, set_name).stat().st_size == resource.size
        base = "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/"
        assert resource.url == base + resource.filename
    assert RESOURCES["background"].hash == "md5:68d2efa1b9178cc56df9314c21c6e718"
    assert RESOURCES["evaluation"].hash == "md5:6b91aef0f799c5bb55b94e3f2daec811"


def test_prepare_over_http_counts_and_idempotence(shared_data, http_server, tmp_path):
    http_server.directory = shared_data
    entries = prepare_omniglot(sets=SMALL, data_dir=tmp_path, mirrors=[http_server.base_url], progress=False)
    assert [entry.meta["set"] for entry in entries] == list(SMALL)
    for entry, set_name, characters in zip(entries, SMALL, (136, 156)):
        path = f"omniglot/{RESOURCES[set_name].filename}"
        assert http_server.requests(path) == 1
        assert check_hash(tmp_path / "raw" / "omniglot" / RESOURCES[set_name].filename, RESOURCES[set_name].hash)[0]
        assert entry.meta["n_characters"] == characters
        assert entry.meta["n_images"] == characters * 20
        assert {a["name"]: len(a["characters"]) for a in entry.meta["alphabets"]} == ALPHABETS[set_name]
        assert entry.files == sorted(f"{name}.pklz" for name in ALPHABETS[set_name])
        for record in entry.meta["alphabets"]:
            images = entry.load(record["file"])
            assert images.dtype == np.uint8
            assert images.shape == (len(record["characters"]), 20, 105, 105)
            assert set(np.unique(images)) == {0, 255}
            # strokes are the minority: white (255) on black (0)
            assert (images == 255).mean() < 0.2
    again = prepare_omniglot(sets=SMALL, data_dir=tmp_path, mirrors=[http_server.base_url], progress=False)
    assert [entry.key for entry in again] == [entry.key for entry in entries]
    assert http_server.requests() == 2  # nothing fetched the second time


def test_every_image_equals_a_pillow_decode(shared_data, prepared):
    for set_name in SMALL:
        entry = native(prepared, set_name)
        records = {record["name"]: record for record in entry.meta["alphabets"]}
        arrays = {name: entry.load(record["file"]) for name, record in records.items()}
        seen = 0
        with zipfile.ZipFile(zip_of(shared_data, set_name)) as archive:
            for member in archive.namelist():
                match = MEMBER.match(member)
                if match is None:
                    continue
                alphabet, number, character_id, drawer = match.groups()
                pillow = np.array(Image.open(io.BytesIO(archive.read(member))).convert("L"))
                np.testing.assert_array_equal(arrays[alphabet][int(number) - 1, int(drawer) - 1], 255 - pillow)
                assert records[alphabet]["characters"][int(number) - 1] == f"character{number}"
                assert records[alphabet]["ids"][int(number) - 1] == character_id
                seen += 1
        assert seen == entry.meta["n_images"]


def test_worker_count():
    assert worker_count(None, 5_840, 5) == 1  # small sets are decoded inline
    assert worker_count(None, PARALLEL_MIN_IMAGES, 30) >= 1
    assert worker_count(2, 100, 5) == 2 and worker_count(8, 100, 5) == 5
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers .* is invalid: give a positive number of processes"):
            worker_count(bad, 100, 5)


def test_worker_processes_write_the_same_arrays(shared_data, prepared, tmp_path):
    entry = prepare_omniglot(sets="small1", data_dir=tmp_path, mirrors=[shared_data.as_uri()], progress=False,
                             workers=2)[0]
    inline = native(prepared, "small1")
    assert entry.meta == inline.meta and entry.meta["verified_archive"] is True
    for name in inline.files:
        np.testing.assert_array_equal(entry.load(name), inline.load(name))


def test_resized_variant_is_the_kernels_output(prepared):
    for method in ("area", "box"):
        small = prepare_omniglot(sets="small1", shapes=[(28, 28), (105, 105)], method=method, data_dir=prepared,
                                 progress=False)
        assert len(small) == 2 and small[1].meta["shape"] == [28, 28] and small[1].meta["resize"] == method
        base = native(prepared, "small1")
        for name in base.files:
            images = base.load(name)
            expected = resize(images.reshape(-1, 105, 105), (28, 28), method=method).reshape(*images.shape[:2], 28, 28)
            np.testing.assert_array_equal(small[1].load(name), expected)
    x, y, class_map = load_omniglot(["Latin,1"], sets="small1", shape=(28, 28), seed=3, data_dir=prepared)
    expected = resize(class_array(prepared, "small1", "Latin", 1), (28, 28), method="area")
    np.testing.assert_array_equal(x, expected[np.random.default_rng(3).permutation(20)])


# -- loading ---------------------------------------------------------------------------------
def test_load_is_class_ordered_then_shuffled_by_the_seed(prepared):
    x, y, class_map = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=7, data_dir=prepared)
    assert class_map == {"Korean,1": 0, "Latin,10": 1, "Latin,3": 2}  # sorted names
    stack = np.concatenate([class_array(prepared, "small1", "Korean", 1), class_array(prepared, "small1", "Latin", 10),
                            class_array(prepared, "small1", "Latin", 3)])
    order = np.random.default_rng(7).permutation(60)
    np.testing.assert_array_equal(x, stack[order])
    np.testing.assert_array_equal(y, np.repeat(np.arange(3), 20)[order])
    assert x.dtype == np.uint8 and y.dtype == np.int64
    x2, y2, _ = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=7, data_dir=prepared)
    np.testing.assert_array_equal(x2, x)
    _, y3, _ = load_omniglot(["Latin,3", "Korean,1", "Latin,10"], sets="small1", seed=8, data_dir=prepared)
    assert not np.array_equal(y3, y)


def test_indices_blank_and_one_hot(prepared):
    x, y, class_map = load_omniglot(["Greek,2"], sets="small2", indices=[19, 0, 5], include_blank=True,
                                    one_hot=True, seed=1, data_dir=prepared)
    assert class_map == {"Greek,2": 0, " ": 1}
    assert x.shape == (6, 105, 105)
    assert y.dtype == np.float32 and y.shape == (6, 2)
    np.testing.assert_array_equal(y.sum(axis=1), np.ones(6))
    labels = y.argmax(axis=1)
    drawings = class_array(prepared, "small2", "Greek", 2)[[19, 0, 5]]
    expected = np.concatenate([drawings, np.zeros((3, 105, 105), np.uint8)])
    order = np.random.default_rng(1).permutation(6)
    np.testing.assert_array_equal(x, expected[order])
    np.testing.assert_array_equal(labels, np.array([0, 0, 0, 1, 1, 1])[order])


def test_all_classes_of_a_set(prepared):
    x, y, class_map = load_omniglot(sets="small1", seed=0, data_dir=prepared)
    assert x.shape == (136 * 20, 105, 105)
    assert list(class_map) == sorted(class_map) and len(class_map) == 136
    np.testing.assert_array_equal(np.bincount(y), np.full(136, 20))
    assert omniglot_classes("small1", data_dir=prepared) == list(class_map)


def test_shared_alphabets_are_qualified_never_merged(prepared):
    names = omniglot_classes(SMALL, data_dir=prepared)
    assert len(names) == 136 + 156
    qualified = [name for name in names if "/" in name]
    assert len(qualified) == 2 * (24 + 26)
    assert "small1/Latin,3" in names and "small2/Latin,3" in names and "Latin,3" not in names
    assert "Korean,1" in names and "small1/Korean,1" not in names
    with pytest.raises(ValueError, match=r"'Latin,3' is ambiguous.*'small1/Latin,3' or 'small2/Latin,3'"):
        load_omniglot(["Latin,3"], sets=SMALL, data_dir=prepared)
    x, y, class_map = load_omniglot(["small2/Latin,3", "small1/Latin,3", "small1/Korean,1"], sets=SMALL, seed=0,
                                    data_dir=prepared)
    assert class_map == {"Korean,1": 0, "small1/Latin,3": 1, "small2/Latin,3": 2}
    latin1, latin2 = (class_array(prepared, name, "Latin", 3) for name in SMALL)
    np.testing.assert_array_equal(latin1, latin2)  # the same drawings in both zips: kept as two classes
    stack = np.concatenate([class_array(prepared, "small1", "Korean", 1), latin1, latin2])
    order = np.random.default_rng(0).permutation(60)
    np.testing.assert_array_equal(x, stack[order])
    np.testing.assert_array_equal(y, np.repeat(np.arange(3), 20)[order])
    with pytest.raises(ValueError, match="alphabet Korean is in the selected sets small1 only"):
        load_omniglot(["small2/Korean,1"], sets=SMALL, data_dir=prepared)
    # one set alone: bare names, and the qualified form means the same class
    assert load_omniglot(["small2/Latin,3"], sets="small2", data_dir=prepared)[2] == {"Latin,3": 0}


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


def test_load_prepares_when_allowed_and_refuses_otherwise(shared_data, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Omniglot sets \['small2'\] are not prepared.*prepare_omniglot"):
        load_omniglot(["Tagalog,1"], sets="small2", data_dir=tmp_path, download=False)
    assert not (tmp_path / "raw").exists()
    x, y, class_map = load_omniglot(["Tagalog,1"], sets="small2", data_dir=tmp_path, mirrors=[shared_data.as_uri()])
    assert x.shape == (20, 105, 105) and class_map == {"Tagalog,1": 0}
    # a resized variant is made from the cached 105x105 entry, even without download
    x, _, _ = load_omniglot(["Tagalog,1"], sets="small2", shape=(14, 14), data_dir=tmp_path, download=False)
    assert x.shape == (20, 14, 14)


def test_placed_zip_is_used_offline(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    with pytest.raises(DownloadError, match=r"images_background_small1\.zip"):
        prepare_omniglot(sets="small1", data_dir=tmp_path, progress=False)
    raw = tmp_path / "raw" / "omniglot"
    shutil.copyfile(zip_of(shared_data, "small1"), raw / RESOURCES["small1"].filename)
    entry = prepare_omniglot(sets="small1", data_dir=tmp_path, progress=False)[0]
    assert entry.meta["n_characters"] == 136 and entry.meta["verified_archive"] is True
    unchecked = prepare_omniglot(sets="small1", data_dir=tmp_path / "other", verify=False, progress=False,
                                 archives={"small1": raw / RESOURCES["small1"].filename})[0]
    assert unchecked.meta["verified_archive"] is False


def test_dataset_object_in_class_order(prepared):
    ds = Omniglot(["Latin,2", "Greek,1"], sets="small2", indices=[3, 4], include_blank=True,
                  transform=lambda image: image[:2], data_dir=prepared, download=False)
    assert ds.classes == ["Greek,1", "Latin,2", " "] and ds.class_map == {"Greek,1": 0, "Latin,2": 1, " ": 2}
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


# -- episodes -------------------------------------------------------------------------------
def test_episodes_are_seeded_and_disjoint(prepared):
    episodes = list(omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", seed=11, data_dir=prepared))
    again = list(omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", seed=11, data_dir=prepared))
    assert len(episodes) == 4
    for episode, twin in zip(episodes, again):
        np.testing.assert_array_equal(episode.support_x, twin.support_x)
        np.testing.assert_array_equal(episode.query_x, twin.query_x)
        assert episode.classes == twin.classes
    for episode in episodes:
        assert len(set(episode.classes)) == 5
        assert episode.support_x.shape == (5, 105, 105) and episode.query_x.shape == (15, 105, 105)
        np.testing.assert_array_equal(episode.support_y, np.arange(5))
        np.testing.assert_array_equal(episode.query_y, np.repeat(np.arange(5), 3))
        for label, name in enumerate(episode.classes):
            alphabet, number = name.split(",")
            drawings = class_array(prepared, "small1", alphabet, int(number))
            picked = [episode.support_x[label], *episode.query_x[episode.query_y == label]]
            drawers = [int(np.flatnonzero((drawings == image).all(axis=(1, 2)))[0]) for image in picked]
            assert len(set(drawers)) == 4  # support and queries are different drawings of the class
    assert [e.classes for e in omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", seed=12, data_dir=prepared)] \
        != [e.classes for e in episodes]


def test_episodes_respect_classes_indices_and_shape(prepared):
    stream = omniglot_episodes(2, 2, 1, classes=["Latin,1", "Latin,2"], indices=[0, 1, 2], shape=(28, 28),
                               sets="small1", seed=0, data_dir=prepared)
    for _ in range(3):  # endless without n_episodes
        episode = next(stream)
        assert sorted(episode.classes) == ["Latin,1", "Latin,2"]
        assert episode.support_x.shape == (4, 28, 28) and episode.query_x.shape == (2, 28, 28)


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        ((0, 1, 1), {}, r"n_way must be an integer >= 1"),
        ((2, 0, 1), {}, r"k_shot must be an integer >= 1"),
        ((2, 1, -1), {}, r"n_query must be an integer >= 0"),
        ((2, 15, 6), {}, r"k_shot \+ n_query = 21 drawings per class, but only 20 drawers"),
        ((2, 2, 1), {"indices": [0, 1]}, r"only 2 drawers are selected"),
        ((3, 1, 1), {"classes": ["Latin,1", "Latin,2"]}, r"n_way=3 is more than the 2 classes selected"),
        ((2, 1, 1), {"n_episodes": -1}, r"n_episodes must be a non-negative integer"),
    ],
)
def test_bad_episode_arguments(prepared, arguments, options, message):
    with pytest.raises(ValueError, match=message):
        omniglot_episodes(*arguments, **{"sets": "small1", "data_dir": prepared, "download": False, **options})


# -- bad archives never leave a cache entry ---------------------------------------------------
def rewrite_zip(
    source: Path, target: Path, *, drop: str | None = None, replace: dict[str, bytes] | None = None
) -> Path:
    """Copy the real zip member by member, dropping or replacing some members."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            if info.filename == drop:
                continue
            new.writestr(info, (replace or {}).get(info.filename, old.read(info)))
    return target


def assert_no_entry(data_dir: Path) -> None:
    store = CacheStore.for_data_dir(data_dir)
    assert store.ls() == []
    kind_dir = store.root / "omniglot"
    assert not kind_dir.exists() or [p.name for p in kind_dir.iterdir() if not p.name.endswith(".lock")] == []


def test_wrong_archive_hash_is_refused(shared_data, tmp_path):
    with pytest.raises(HashMismatchError, match=r"expected sha256:f38eb80f.*pass verify=False"):
        prepare_omniglot(sets="small1", archives={"small1": zip_of(shared_data, "small2")}, data_dir=tmp_path,
                         progress=False)
    assert_no_entry(tmp_path)


def test_missing_drawer_is_a_format_error(shared_data, tmp_path):
    source = zip_of(shared_data, "small1")
    broken = rewrite_zip(source, tmp_path / "broken.zip", drop="images_background_small1/Latin/character05/0687_13.png")
    with pytest.raises(OmniglotFormatError, match=r"Latin/character05 has drawers \[1, .*12, 14, .*20\]"):
        prepare_omniglot(sets="small1", archives={"small1": broken}, verify=False, data_dir=tmp_path / "d",
                         progress=False)
    assert_no_entry(tmp_path / "d")


@pytest.mark.parametrize("workers", [1, 2])
def test_undecodable_png_late_in_the_set_leaves_no_entry(shared_data, tmp_path, workers):
    member = "images_background_small1/Latin/character26/0708_20.png"
    broken = rewrite_zip(zip_of(shared_data, "small1"), tmp_path / "broken.zip", replace={member: b"not a png"})
    with pytest.raises(ValueError, match=rf"cannot decode image {re.escape(member)} in .*broken\.zip"):
        prepare_omniglot(sets="small1", archives={"small1": broken}, verify=False, data_dir=tmp_path / "d",
                         progress=False, workers=workers)
    assert_no_entry(tmp_path / "d")


def test_archives_must_name_selected_sets(shared_data, tmp_path):
    with pytest.raises(ValueError, match=r"archives names sets \['small2'\] that are not in sets \['small1'\]"):
        prepare_omniglot(sets="small1", archives={"small2": zip_of(shared_data, "small2")}, data_dir=tmp_path)
