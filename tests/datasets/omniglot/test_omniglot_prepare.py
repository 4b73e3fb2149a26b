"""prepare_omniglot on the real small1/small2 zips: conversion, workers, variants, archives, offline, bad zips."""
from __future__ import annotations

import io
import re
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glyphforge.cache import CacheStore
from glyphforge.datasets.omniglot.archive import PARALLEL_MIN_IMAGES, worker_count
from glyphforge.datasets.omniglot.dataset import RESOURCES, OmniglotFormatError, load_omniglot, prepare_omniglot
from glyphforge.hashes import check_hash
from glyphforge.pipelines.resize import resize
from glyphforge.pipelines.resource import DownloadError, HashMismatchError

from support.http_server import http_server  # noqa: F401 (fixture)

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


def assert_same_entry(entry, other) -> None:
    assert entry.meta == other.meta
    for name in other.files:
        np.testing.assert_array_equal(entry.load(name), other.load(name))


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
    for entry, set_name, characters in zip(entries, SMALL, (136, 156), strict=True):
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


def test_entry_params_are_unchanged(prepared):
    """The cache keys of existing data dirs stay valid: the params are exactly these."""
    entry = native(prepared, "small1")
    assert entry.params == {"set": "small1", "shape": [105, 105], "source": RESOURCES["small1"].hash}
    small = prepare_omniglot(sets="small1", shapes=[(28, 28)], data_dir=prepared, progress=False)[1]
    assert small.params == {"set": "small1", "shape": [28, 28], "source": RESOURCES["small1"].hash, "resize": "area"}


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


def test_worker_count(monkeypatch):
    assert worker_count(None, 5_840, 5) == 1  # small sets are decoded inline
    monkeypatch.setattr("os.cpu_count", lambda: 8)  # the CPU count comes from glyphforge._checks.worker_count
    assert worker_count(None, PARALLEL_MIN_IMAGES, 30) == 8
    assert worker_count(None, PARALLEL_MIN_IMAGES, 5) == 5  # at most one process per alphabet
    assert worker_count(2, 100, 5) == 2 and worker_count(8, 100, 5) == 5
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=rf"workers must be an integer >= 1, got {re.escape(repr(bad))}"):
            worker_count(bad, 100, 5)


def test_worker_processes_write_the_same_arrays(shared_data, prepared, tmp_path):
    entry = prepare_omniglot(sets="small1", data_dir=tmp_path, mirrors=[shared_data.as_uri()], progress=False,
                             workers=2)[0]
    inline = native(prepared, "small1")
    assert entry.meta["verified_archive"] is True
    assert_same_entry(entry, inline)


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
    x, _, _ = load_omniglot(["Latin,1"], sets="small1", shape=(28, 28), seed=3, data_dir=prepared)
    expected = resize(native(prepared, "small1").load("Latin.pklz")[0], (28, 28), method="area")
    np.testing.assert_array_equal(x, expected[np.random.default_rng(3).permutation(20)])


# -- archives, placed files and offline ------------------------------------------------------
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
    # with verify=False upstream's zip is still upstream's: hashed, it keeps upstream's key and counts as verified
    assert unchecked.key == entry.key and unchecked.meta["verified_archive"] is True


def test_offline_true_with_nothing_placed_fails_fast_naming_the_placement_path(tmp_path):
    # GLYPHFORGE_OFFLINE is unset (conftest): offline=True alone must keep prepare off the network
    placed = tmp_path / "raw" / "omniglot" / "images_background_small1.zip"
    start = time.monotonic()
    with pytest.raises(DownloadError, match=rf"(?s)Offline mode.*place the file at:\n  {re.escape(str(placed))}\n"):
        prepare_omniglot(sets="small1", data_dir=tmp_path, offline=True, progress=False)
    assert time.monotonic() - start < 5
    with pytest.raises(DownloadError, match=re.escape(str(placed))):
        load_omniglot(["Latin,1"], sets="small1", data_dir=tmp_path, offline=True)
    assert CacheStore.for_data_dir(tmp_path).ls() == []


@pytest.mark.parametrize("key", ["small1", "images_background_small1.zip"])
def test_archives_by_set_name_or_file_name(shared_data, prepared, tmp_path, key):
    entry, = prepare_omniglot(sets="small1", archives={key: zip_of(shared_data, "small1")}, data_dir=tmp_path,
                              offline=True, progress=False)
    assert entry.meta["verified_archive"] is True
    assert not (tmp_path / "raw" / "omniglot" / RESOURCES["small1"].filename).exists()  # used in place
    assert_same_entry(entry, native(prepared, "small1"))


def test_unknown_archives_key_lists_the_valid_ones(shared_data, tmp_path):
    with pytest.raises(ValueError, match=r"archives has 'small3', which is not a file of Omniglot: use one of "
                                         r"background, evaluation, images_background\.zip, "
                                         r"images_background_small1\.zip, .*small1, small2$"):
        prepare_omniglot(sets="small1", archives={"small3": zip_of(shared_data, "small1")}, data_dir=tmp_path)


def test_archives_must_name_selected_sets(shared_data, tmp_path):
    for key in ("small2", "images_background_small2.zip"):
        with pytest.raises(ValueError, match=r"archives names sets \['small2'\] that are not in sets \['small1'\]"):
            prepare_omniglot(sets="small1", archives={key: zip_of(shared_data, "small2")}, data_dir=tmp_path)


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
