"""Backgrounds on the real files of e2crawfo/backgrounds: registry, decoding, names, resizing, bad input."""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glyphforge.cache import CacheStore
from glyphforge.datasets.backgrounds import (
    COMMIT,
    RESOURCES,
    background_names,
    hard_background_names,
    load_backgrounds,
    prepare_backgrounds,
    preview_examples,
)
from glyphforge.hashes import check_hash
from glyphforge.pipelines.resize import resize
from glyphforge.pipelines.resource import DownloadError, HashMismatchError

from support.http_server import http_server  # noqa: F401 (fixture)

ALL = ["blue_circle", "blue_x", "circles", "curves", "floor", "gravel", "green_circle", "green_x", "ice",
       "red_circle", "red_x", "space", "water"]
HARD = ["circles", "curves", "floor", "gravel", "ice", "space", "water"]
CARRIED = [name for name in ALL if name != "space"]  # space.jpg is not in ../shared/data


def source(shared_data: Path, name: str) -> Path:
    return next((shared_data / "backgrounds").glob(f"{name}.[jp][pn]g"))


def pillow_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.array(image.convert("RGB"))


@pytest.fixture(scope="module")
def prepared(shared_data, tmp_path_factory) -> Path:
    """A data dir with the 12 carried backgrounds decoded from the file:// mirror."""
    data_dir = tmp_path_factory.mktemp("backgrounds")
    prepare_backgrounds(names=CARRIED, data_dir=data_dir, mirrors=shared_data.as_uri(), progress=False)
    return data_dir


def test_names():
    assert background_names() == ALL
    assert hard_background_names() == HARD


def test_registry_pins_the_real_files(shared_data):
    assert len(RESOURCES) == 14
    for path in sorted((shared_data / "backgrounds").iterdir()):
        resource = RESOURCES[path.name]
        assert resource.url == f"https://raw.githubusercontent.com/e2crawfo/backgrounds/{COMMIT}/{path.name}"
        assert resource.hash.startswith("sha256:") and resource.size == path.stat().st_size
        assert check_hash(path, resource.hash)[0]
    assert RESOURCES["space.jpg"].hash == "git-blob-sha1:c8ed07e97d4e345c1b77350b510ca19f895bd5e7"


def test_prepare_over_http_equals_pillow_and_skips_svg(shared_data, http_server, tmp_path):
    http_server.directory = shared_data
    entry, = prepare_backgrounds(names=CARRIED, data_dir=tmp_path, mirrors=[http_server.base_url], progress=False)
    assert sorted(entry.meta["backgrounds"]) == CARRIED
    for name in CARRIED:
        image = entry.load(entry.meta["backgrounds"][name]["file"])
        expected = pillow_rgb(source(shared_data, name))
        assert image.dtype == np.uint8 and image.shape == expected.shape and image.shape[2] == 3
        np.testing.assert_array_equal(image, expected)
        assert http_server.requests(f"backgrounds/{source(shared_data, name).name}") == 1
        assert entry.meta["backgrounds"][name]["verified"] is True
    assert http_server.requests("backgrounds/red_x.svg") == 0
    assert http_server.requests() == 12
    again, = prepare_backgrounds(names=CARRIED, data_dir=tmp_path, mirrors=[http_server.base_url], progress=False)
    assert again.key == entry.key and http_server.requests() == 12
    x, y, classes = load_backgrounds(["water", "ice"], data_dir=tmp_path, download=False)
    assert [image.shape for image in x] == [(265, 398, 3), (1080, 1920, 3)]
    assert classes == ["ice", "water"] and y.dtype == np.int64 and y.tolist() == [1, 0]


def test_name_forms_and_order(shared_data, prepared):
    by_list, labels, classes = load_backgrounds(["water", "red_x", "water"], data_dir=prepared, download=False)
    by_string, same_labels, same_classes = load_backgrounds("water red_x.png water.jpg", data_dir=prepared,
                                                            download=False)
    assert len(by_list) == len(by_string) == 3
    assert classes == same_classes == ["red_x", "water"]  # sorted and distinct, as every loader's classes
    assert labels.tolist() == same_labels.tolist() == [1, 0, 1]
    for image, other, name in zip(by_list, by_string, ["water", "red_x", "water"], strict=True):
        expected = pillow_rgb(source(shared_data, name))
        np.testing.assert_array_equal(image, expected)
        np.testing.assert_array_equal(other, expected)


def test_shape_resizes_each_image_with_the_kernel(shared_data, prepared):
    images, _, _ = load_backgrounds(["curves", "blue_x"], shape=(48, 64), data_dir=prepared, download=False)
    for image, name in zip(images, ["curves", "blue_x"], strict=True):
        original = pillow_rgb(source(shared_data, name))
        assert image.shape == (48, 64, 3)
        np.testing.assert_array_equal(image, resize(original, (48, 64), method="bilinear", batch=False))
        with Image.open(source(shared_data, name)) as pil:  # the kernel's bilinear is Pillow's
            np.testing.assert_array_equal(image, np.array(pil.convert("RGB").resize((64, 48), Image.BILINEAR)))
    area = load_backgrounds(["curves"], shape=(48, 64), method="area", data_dir=prepared, download=False)[0][0]
    np.testing.assert_array_equal(area, resize(pillow_rgb(source(shared_data, "curves")), (48, 64), method="area",
                                               batch=False))
    store = CacheStore.for_data_dir(prepared)
    variant = store.get("backgrounds", {"commit": COMMIT, "shape": [48, 64], "resize": "bilinear"})
    assert sorted(variant.meta["backgrounds"]) == ["blue_x", "curves"]


def test_a_subset_grows_into_one_entry(shared_data, http_server, tmp_path):
    http_server.directory = shared_data
    first, = prepare_backgrounds(names=["water"], data_dir=tmp_path, mirrors=http_server.base_url, progress=False)
    water = first.load("water.pklz")
    (tmp_path / "raw" / "backgrounds" / "water.jpg").unlink()  # what the entry holds is neither fetched nor read
    second, = prepare_backgrounds(names="ice water green_x", data_dir=tmp_path, mirrors=http_server.base_url,
                                  progress=False)
    fetched = [http_server.requests(f"backgrounds/{name}") for name in ("water.jpg", "ice.jpg", "green_x.png")]
    assert fetched == [1, 1, 1]
    assert second.key == first.key
    assert sorted(second.meta["backgrounds"]) == ["green_x", "ice", "water"]
    np.testing.assert_array_equal(second.load("water.pklz"), water)
    np.testing.assert_array_equal(first.load("water.pklz"), water)  # a reader's older handle still reads
    kind_dir = CacheStore.for_data_dir(tmp_path).root / "backgrounds"
    assert sorted(p.name for p in kind_dir.iterdir() if not p.name.endswith((".lock", ".readers"))) == [first.key]


def test_missing_file_fails_clearly_and_keeps_the_entry(shared_data, prepared, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    where = r"(?s)could not get backgrounds/space\.jpg.*place the file at:\n.*raw/backgrounds/space\.jpg"
    with pytest.raises(DownloadError, match=where):
        load_backgrounds("hard", data_dir=prepared, mirrors=shared_data.as_uri())
    with pytest.raises(FileNotFoundError, match=r"backgrounds \['space'\] are not prepared.*prepare_backgrounds"):
        load_backgrounds("all", data_dir=prepared, download=False)
    entry = CacheStore.for_data_dir(prepared).get("backgrounds", {"commit": COMMIT})
    assert sorted(entry.meta["backgrounds"]) == CARRIED


def test_classes_none_means_all(shared_data, tmp_path):
    archives = {name: source(shared_data, name) for name in CARRIED}
    archives["space"] = source(shared_data, "water")  # space.jpg is not carried: a stand-in, used unverified
    prepare_backgrounds(names="all", archives=archives, verify=False, data_dir=tmp_path, offline=True, progress=False)
    x, y, classes = load_backgrounds(data_dir=tmp_path, download=False)
    assert classes == ALL and y.tolist() == list(range(13)) and y.dtype == np.int64
    np.testing.assert_array_equal(x[ALL.index("space")], pillow_rgb(source(shared_data, "water")))
    for image, name in zip(x, ALL, strict=True):
        if name != "space":
            np.testing.assert_array_equal(image, pillow_rgb(source(shared_data, name)))
    chosen, labels, names = load_backgrounds(["water", "ice", "space"], data_dir=tmp_path, download=False)
    assert names == ["ice", "space", "water"] and labels.tolist() == [2, 0, 1]  # with the own space: its entry
    np.testing.assert_array_equal(chosen[0], x[ALL.index("water")])


def test_png_transparency_is_composited_on_black(tmp_path):
    rgba = np.zeros((4, 5, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 255
    rgba[:2, :, 3] = 0  # top half transparent
    rgba[3, 4] = (100, 50, 250, 128)
    raw = tmp_path / "raw" / "backgrounds"
    raw.mkdir(parents=True)
    Image.fromarray(rgba, "RGBA").save(raw / "blue_x.png")  # a custom file: used as is with verify=False
    entry, = prepare_backgrounds(names=["blue_x"], data_dir=tmp_path, verify=False, progress=False)
    assert entry.meta["backgrounds"]["blue_x"]["verified"] is False
    (image,), _, _ = load_backgrounds(["blue_x"], data_dir=tmp_path, download=False)
    expected = np.zeros((4, 5, 3), np.uint8)
    expected[2:, :, 0] = 200
    expected[3, 4] = (50, 25, 125)  # (value * 128 + 127) // 255
    np.testing.assert_array_equal(image, expected)


def test_all_and_hard_as_one_element_lists(prepared):
    for names in ("all", ["all"], ("all",)):
        with pytest.raises(FileNotFoundError, match=r"backgrounds \['space'\] are not prepared"):
            load_backgrounds(names, data_dir=prepared, download=False)
    with pytest.raises(FileNotFoundError, match=r"backgrounds \['space'\] are not prepared"):
        load_backgrounds(["hard"], data_dir=prepared, download=False)
    # the CLI passes ["hard"]: only space.jpg is missing from the entry, so only it is fetched
    with pytest.raises(DownloadError, match=r"could not get backgrounds/space\.jpg"):
        prepare_backgrounds(names=["hard"], data_dir=prepared, offline=True, progress=False)
    with pytest.raises(ValueError, match=r"unknown backgrounds 'all'"):  # only a list of exactly "all" means all
        load_backgrounds(["all", "water"], data_dir=prepared, download=False)


@pytest.mark.parametrize("keys", [("water", "ice"), ("water.jpg", "ice.jpg")])
def test_archives_are_used_in_place_and_verified(shared_data, tmp_path, keys):
    archives = {key: source(shared_data, Path(key).stem) for key in keys}
    entry, = prepare_backgrounds(names=["ice", "water"], archives=archives, data_dir=tmp_path, offline=True,
                                 progress=False)
    assert sorted(entry.meta["backgrounds"]) == ["ice", "water"]
    assert not (tmp_path / "raw" / "backgrounds").exists()  # given files are not copied
    for name in ("ice", "water"):
        assert entry.meta["backgrounds"][name]["verified"] is True
        np.testing.assert_array_equal(entry.load(f"{name}.pklz"), pillow_rgb(source(shared_data, name)))


def test_archives_of_another_file_need_verify_false(shared_data, tmp_path):
    ice = source(shared_data, "ice")
    with pytest.raises(HashMismatchError, match=r"ice\.jpg is not .*water\.jpg.*pass verify=False"):
        prepare_backgrounds(names=["water"], archives={"water": ice}, data_dir=tmp_path, progress=False)
    assert CacheStore.for_data_dir(tmp_path).ls() == []
    entry, = prepare_backgrounds(names=["water"], archives={"water.jpg": ice}, verify=False, data_dir=tmp_path,
                                 progress=False)
    assert entry.meta["backgrounds"]["water"]["verified"] is False
    np.testing.assert_array_equal(entry.load("water.pklz"), pillow_rgb(ice))


@pytest.mark.parametrize(
    ("names", "archives", "message"),
    [
        (["water"], {"lava": "x.jpg"}, r"archives has 'lava', which is not a file of backgrounds: use one of "
                                       r"blue_circle, blue_circle\.png, .* water, water\.jpg$"),
        (["water"], {"red_x.svg": "x.svg"}, r"archives has 'red_x\.svg', which is not a file of backgrounds"),
        (["water"], {"ice": "ice.jpg"}, r"archives names backgrounds \['ice'\] that are not in names \['water'\]"),
    ],
)
def test_bad_archives(tmp_path, names, archives, message):
    with pytest.raises(ValueError, match=message):
        prepare_backgrounds(names=names, archives=archives, data_dir=tmp_path, progress=False)


def test_offline_with_nothing_placed_fails_fast_naming_the_placement_path(tmp_path):
    placed = tmp_path / "raw" / "backgrounds" / "water.jpg"
    where = rf"(?s)could not get backgrounds/water\.jpg.*Offline mode.*place the file at:\n  {re.escape(str(placed))}\n"
    start = time.monotonic()
    with pytest.raises(DownloadError, match=where):
        prepare_backgrounds(names=["water"], data_dir=tmp_path, offline=True, progress=False)
    with pytest.raises(DownloadError, match=where):
        load_backgrounds(["water"], data_dir=tmp_path, offline=True)
    assert time.monotonic() - start < 5
    assert CacheStore.for_data_dir(tmp_path).ls() == []


def test_preview_examples_are_the_first_backgrounds_of_the_entry(shared_data, prepared):
    entry = CacheStore.for_data_dir(prepared).get("backgrounds", {"commit": COMMIT})
    images, names = preview_examples(entry, 4, np.random.default_rng(0), prepared)
    assert names == ["blue_circle", "blue_x", "circles", "curves"]
    for image, name in zip(images, names, strict=True):
        np.testing.assert_array_equal(image, pillow_rgb(source(shared_data, name)))
    images, names = preview_examples(entry, 50, np.random.default_rng(1), prepared)
    assert names == CARRIED and len(images) == 12


@pytest.mark.parametrize(
    ("names", "options", "message"),
    [
        (["lava"], {}, r"unknown backgrounds 'lava': the known ones are blue_circle, blue_x, .* water "
                       r"\(or 'all', 'hard'\)"),
        (["red_x.svg"], {}, r"unknown backgrounds 'red_x.svg'.*red_x.svg is not loaded, red_x is its PNG rendering"),
        (["water.png"], {}, r"unknown backgrounds 'water.png'"),
        ([3], {}, r"unknown backgrounds 3"),
        ([], {}, r"names is empty"),
        ("", {}, r"names is empty"),
        (["water"], {"shape": (48,)}, r"shape \(48,\) is invalid"),
        (["water"], {"shape": (48, 48), "method": "nearest"}, r"resize method 'nearest' is unknown"),
    ],
)
def test_bad_arguments(tmp_path, names, options, message):
    with pytest.raises(ValueError, match=message):
        load_backgrounds(names, data_dir=tmp_path, download=False, **options)
    assert not (tmp_path / "cache").exists()
