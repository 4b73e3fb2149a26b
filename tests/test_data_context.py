"""One DataContext, given once, reaches every prepare, load and build path (and the CLI's fetch flags).

Real files from ../shared/data served by the real local HTTP server (its request log is the
evidence of what was fetched), real builds, and the installed console scripts.
"""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from glyphforge import DataContext, build
from glyphforge.cache import CacheStore
from glyphforge.datasets.backgrounds import COMMIT, load_backgrounds, prepare_backgrounds
from glyphforge.datasets.omniglot.dataset import RESOURCES, load_omniglot, prepare_omniglot
from glyphforge.hashes import file_hash
from glyphforge.pipelines.resource import DownloadError, HashMismatchError
from glyphforge.scenes.spec import ScatteredGlyphs

from support.cli import run_here
from support.http_server import http_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec

SMALL1 = "omniglot/images_background_small1.zip"
WATER = "backgrounds/water.jpg"


def scenes(**options) -> ScatteredGlyphs:
    """A small Omniglot scenes spec on water: it needs small1 at 14x14 (box) and water.jpg."""
    return ScatteredGlyphs(4, glyphs="omniglot", characters=["Latin,1", "Latin,2"], glyph_options={"sets": ["small1"]},
                           backgrounds=["water"], shard_size=2, **options)


def test_a_mirror_given_once_is_used_by_prepare_by_a_load_that_prepares_and_by_a_build(
    shared_data, http_server, tmp_path
):
    http_server.directory = shared_data
    context = DataContext.resolve(data_dir=tmp_path / "prepare", mirrors=[http_server.base_url], progress=False)
    entry, = prepare_omniglot(sets="small1", context=context)
    assert entry.meta["verified_archive"] is True and http_server.requests(SMALL1) == 1
    assert (tmp_path / "prepare" / "raw" / "omniglot" / "images_background_small1.zip").is_file()

    loading = DataContext.resolve(context, data_dir=tmp_path / "load")  # the same mirror, another data dir
    x, y, classes = load_backgrounds(["water"], context=loading)
    assert x[0].shape == (265, 398, 3) and y.tolist() == [0] and classes == ["water"]
    x, _, _ = load_omniglot(["Latin,1"], sets="small1", indices=[0], context=loading)
    assert x.shape == (1, 105, 105)
    assert http_server.requests(WATER) == 1 and http_server.requests(SMALL1) == 2

    built = build(scenes(), context=DataContext.resolve(context, data_dir=tmp_path / "build"), progress=False)
    assert len(built) == 4 and built.metadata["class_names"] == ["Latin,1", "Latin,2"]
    assert http_server.requests(WATER) == 2 and http_server.requests(SMALL1) == 3
    assert http_server.requests() == 5  # nothing but those files, once per data dir
    store = CacheStore.for_data_dir(tmp_path / "build")
    assert store.get("backgrounds", {"commit": COMMIT}) is not None
    assert sorted(entry.kind for entry in store.ls()) == ["backgrounds", "omniglot", "omniglot", "scenes"]


def test_offline_given_once_forbids_the_network_everywhere(shared_data, http_server, tmp_path):
    http_server.directory = shared_data  # everything is there: only offline keeps it from being fetched
    context = DataContext.resolve(data_dir=tmp_path, mirrors=[http_server.base_url], offline=True, progress=False)
    offline = r"(?s)could not get {}.*Offline mode"
    with pytest.raises(DownloadError, match=offline.format("omniglot/images_background_small1.zip")):
        prepare_omniglot(sets="small1", context=context)
    with pytest.raises(DownloadError, match=offline.format("backgrounds/water.jpg")):
        load_backgrounds(["water"], context=context)
    with pytest.raises(DownloadError, match=offline.format("omniglot/images_background_small1.zip")):
        load_omniglot(sets="small1", context=context)
    with pytest.raises(DownloadError, match=offline.format("omniglot/images_background_small1.zip")):
        build(scenes(), context=context, progress=False)
    assert http_server.requests() == 0
    assert CacheStore.for_data_dir(tmp_path).ls() == []


def test_verify_false_given_once_reaches_a_hand_placed_file(shared_data, tmp_path):
    raw = tmp_path / "raw"
    (raw / "omniglot").mkdir(parents=True)
    (raw / "backgrounds").mkdir()
    with zipfile.ZipFile(shared_data / SMALL1) as upstream, \
            zipfile.ZipFile(raw / "omniglot" / "images_background_small1.zip", "w") as custom:
        for member in upstream.namelist():  # a custom small1: its Latin alphabet only
            if member.startswith("images_background_small1/Latin/") and member.endswith(".png"):
                custom.writestr(member, upstream.read(member))
    shutil.copyfile(shared_data / "backgrounds" / "ice.jpg", raw / "backgrounds" / "water.jpg")  # ice as water
    checked = DataContext.resolve(data_dir=tmp_path, offline=True, progress=False)
    with pytest.raises(HashMismatchError, match=r"images_background_small1\.zip is not"):
        build(scenes(), context=checked, progress=False)
    assert CacheStore.for_data_dir(tmp_path).ls() == []

    unchecked = DataContext.resolve(checked, verify=False)
    built = build(scenes(), context=unchecked, progress=False)
    store = CacheStore.for_data_dir(tmp_path)
    # the custom files are converted as they are, into entries of their own (never upstream's keys: issue 30)
    assert store.get("omniglot", {"set": "small1", "shape": [105, 105], "source": RESOURCES["small1"].hash}) is None
    [native] = [entry for entry in store.ls() if entry.kind == "omniglot" and entry.params["shape"] == [105, 105]]
    assert native.params["source"].startswith("sha256:") and native.meta["verified_archive"] is False
    assert [record["name"] for record in native.meta["alphabets"]] == ["Latin"]
    assert store.get("backgrounds", {"commit": COMMIT}) is None
    [textures] = [entry for entry in store.ls() if entry.kind == "backgrounds"]
    assert list(textures.params["source"]) == ["water"] and textures.meta["backgrounds"]["water"]["verified"] is False
    (water,), _, _ = load_backgrounds(["water"], context=unchecked, download=False)
    ice, = prepare_backgrounds(names=["ice"], archives={"ice": shared_data / "backgrounds" / "ice.jpg"},
                               context=checked)
    np.testing.assert_array_equal(water, ice.load("ice.pklz"))
    assert len(built) == 4


class PathPrepared(NoiseSpec):
    """A spec written when build handed prepare a Path: it treats its argument as one in every usual way."""

    def prepare(self, data_dir):
        Path(data_dir, "notes").mkdir()
        (data_dir / "notes" / "a.txt").write_text("a")
        with open(os.path.join(data_dir, "notes", "b.txt"), "w") as out:
            out.write("b")
        type(self).seen = [str(data_dir), os.fspath(data_dir)]


def test_a_prepare_written_for_a_data_dir_path_keeps_working(tmp_path):
    built = build(PathPrepared(n_examples=4, shard_size=2), data_dir=tmp_path, progress=False)
    assert len(built) == 4
    assert (tmp_path / "notes" / "a.txt").read_text() == "a" and (tmp_path / "notes" / "b.txt").read_text() == "b"
    assert PathPrepared.seen == [str(tmp_path), str(tmp_path)]


def test_build_scenes_offline_from_a_mirror_directory_with_a_fresh_data_dir(shared_data, tmp_path):
    """The mirror is the only source: offline, a fresh data dir, and the CLI's one context reaching the prepare."""
    data_dir = tmp_path / "fresh"
    args = ["build", "scenes", "--glyphs", "omniglot", "--omniglot-sets", "small1", "--characters", "Latin,1 Latin,2",
            "--backgrounds", "water", "--n-examples", "4", "--shard-size", "2", "--data-dir", data_dir, "-q"]
    without = run_here("glyphforge", *args, "--offline")
    assert without.returncode == 1
    assert "could not get omniglot/images_background_small1.zip" in without.stderr and "Offline mode" in without.stderr
    done = run_here("glyphforge", *args, "--offline", "--mirror", shared_data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("built 4 scenes: entry ")
    for path, name in ((SMALL1, "images_background_small1.zip"), (WATER, "water.jpg")):
        copied = data_dir / "raw" / path.split("/")[0] / name
        assert file_hash(copied, "sha256") == file_hash(shared_data / path, "sha256")
    exported = run_here("glyphforge", "export", "scenes", tmp_path / "npy", "--data-dir", data_dir, "--offline",
                        "--mirror", shared_data, "--no-verify")
    assert exported.returncode == 0, exported.stderr
    assert np.load(tmp_path / "npy" / "images.npy").shape == (4, 48, 48, 3)


@pytest.mark.parametrize("command", [["prepare-data"], ["glyphforge", "build", "scenes"], ["glyphforge", "export"]])
def test_the_fetch_flags_are_the_same_on_every_command(command):
    shown = run_here(command[0], *command[1:], "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    for flag in ("--mirror URL", "--no-verify", "--offline", "never use the network",
                 "fetching (when data is missing)"):
        assert flag in text
