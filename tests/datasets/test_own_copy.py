"""Issue #30 row 3: an own (unverified) copy of upstream files is keyed by its own bytes and says so everywhere.

Own MNIST-format files placed in ``<data dir>/raw/<dataset>/`` and prepared with
``--no-verify`` get an entry of their own (never upstream's key, nor another own copy's);
loads serve the copy the raw dir holds now (files replaced in place are served, not the
first copy's entry; upstream's files serve upstream's entry); ``glyphforge info``, ``cache
ls`` and every load (a WARNING once per process per entry) say "your own copy (unverified)".
The real ``prepare-data`` and ``glyphforge`` with the shipped pins (synthetic files are never
upstream's), and the Python loaders with records pinning synthetic files as "upstream".
"""
from __future__ import annotations

import dataclasses
import gzip
import logging
import os
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge import config
from glyphforge.cache import CacheStore
from glyphforge.cache.keys import cache_key
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.fashion_mnist import load_fashion_mnist
from glyphforge.datasets.mnist import load_mnist, prepare_mnist

from support.cli import run_here
from support.own_copy import OWN, own_warnings, place, prepare_cli
from support.synthetic_emnist import gzip_bytes
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, mnist_family, write_synthetic_mnist

UPSTREAM = mnist_family()


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, SyntheticMNIST]:
    """Three different MNIST-format sets: own copies ``a`` and ``b``, and ``upstream`` (pinned where a test says so)."""
    root = tmp_path_factory.mktemp("copies")
    return {name: write_synthetic_mnist(root / name, (600, 100), seed=seed)
            for seed, name in enumerate(("a", "b", "upstream"), start=11)}


@pytest.fixture(autouse=True)
def fresh_announcements(monkeypatch):
    """Each test is a fresh process as far as the once-per-process warning goes."""
    monkeypatch.setattr(_own_copy, "_announced", set())


def holds_class_0_of(x: np.ndarray, files: SyntheticMNIST) -> bool:
    """Whether the images of a ``subset="test"`` load of label 0 only are ``files``' test images of it (any order)."""
    expected = files.class_images(0, "test").reshape(-1, 784)
    got = x.reshape(-1, 784)
    return got.shape == expected.shape and np.array_equal(np.sort(got, axis=0), np.sort(expected, axis=0))


def upstream_key(dataset: str, shape=(28, 28)) -> str:
    return cache_key(dataset, _class_prepare.params(DECLARATIONS[dataset], "default", shape))


def test_a_replaced_own_copy_is_served_not_the_first_one(copies, tmp_path, caplog):
    data_dir = tmp_path / "data"
    place(copies["a"], data_dir, "mnist")
    prepare_cli("mnist", data_dir)
    [entry_a] = CacheStore.for_data_dir(data_dir).ls()
    assert entry_a.key != upstream_key("mnist") and entry_a.meta["verified"] is False

    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        x, _, _ = load_mnist("0", subset="test", data_dir=data_dir, download=False)
        assert holds_class_0_of(x, copies["a"])
        gf.load("mnist", "0", subset="test", data_dir=data_dir, download=False)
    assert len(own_warnings(caplog)) == 1  # once per process per entry
    assert entry_a.key[:12] in own_warnings(caplog)[0]

    place(copies["b"], data_dir, "mnist")  # other own files, the same options
    unprepared = (r"^MNIST is not prepared in .* as your own copy \(the files .*/raw/mnist/\.own-copy\.json names\): "
                  r"run prepare_mnist\(verify=False\) or `prepare-data mnist --no-verify`, or pass download=True$")
    with pytest.raises(FileNotFoundError, match=unprepared):
        load_mnist(data_dir=data_dir, download=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        x, _, _ = gf.load("mnist", "0", subset="test", data_dir=data_dir, offline=True)  # prepares b's
    assert holds_class_0_of(x, copies["b"])
    entries = CacheStore.for_data_dir(data_dir).ls()
    assert len(entries) == 2 and {entry.meta["verified"] for entry in entries} == {False}
    [entry_b] = [entry for entry in entries if entry.key != entry_a.key]
    assert [entry_b.key[:12] in message for message in own_warnings(caplog)] == [True]
    again = prepare_cli("mnist", data_dir)  # b's entry is there: a cache hit, no third entry
    assert len(CacheStore.for_data_dir(data_dir).ls()) == 2, again.stdout


def test_info_and_cache_ls_say_own_copy(copies, tmp_path):
    data_dir = tmp_path / "data"
    place(copies["a"], data_dir, "fashion-mnist")
    prepare_cli("fashion-mnist", data_dir)
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(entry.key[:12])]
    assert f"fashion-mnist ({OWN})" in row
    info = run_here("glyphforge", "info", "--data-dir", data_dir)
    assert info.returncode == 0, info.stderr
    [line] = [line for line in info.stdout.splitlines() if line.strip().startswith("fashion-mnist")]
    assert line.rstrip().endswith(f"shape=[28,28] ({OWN})")
    [line] = [line for line in info.stdout.splitlines() if line.strip().startswith("mnist ")]
    assert "not prepared" in line  # a copy placed for one dataset is none of another's


def test_fake_digits_never_stand_in_for_upstream_fashion_mnist(copies, tmp_path, monkeypatch, caplog):
    """Fashion-MNIST pinned to the ``upstream`` files; a newcomer's fake digits replace them in raw/, and back."""
    upstream = copies["upstream"]
    resources = {name: dataclasses.replace(resource, url=(tmp_path / "no-origin" / name).as_uri(),
                                           hash=f"md5:{upstream.md5[name]}", size=upstream.size[name])
                 for name, resource in UPSTREAM["fashion-mnist"].resources.items()}
    configs = {"default": dataclasses.replace(UPSTREAM["fashion-mnist"].configs["default"], n_images=(600, 100))}
    monkeypatch.setitem(DECLARATIONS, "fashion-mnist",
                        dataclasses.replace(UPSTREAM["fashion-mnist"], resources=resources, configs=configs))
    data_dir = tmp_path / "data"
    place(upstream, data_dir, "fashion-mnist")
    [verified] = gf.prepare_fashion_mnist(data_dir=data_dir, offline=True, progress=False)
    assert verified.key == upstream_key("fashion-mnist") and verified.meta["verified"] is True

    place(copies["a"], data_dir, "fashion-mnist")  # fake digits, prepared as a custom copy
    [fake] = gf.prepare_fashion_mnist(data_dir=data_dir, offline=True, verify=False, progress=False)
    assert fake.key != verified.key and fake.meta["verified"] is False
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        x, _, _ = load_fashion_mnist(["T-shirt/top"], subset="test", data_dir=data_dir, download=False)
    assert holds_class_0_of(x, copies["a"]) and any(fake.key[:12] in message for message in own_warnings(caplog))

    place(upstream, data_dir, "fashion-mnist")  # upstream's files back in raw/: upstream's entry, no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        ds = gf.FashionMNIST(subset="test", classes=["T-shirt/top"], data_dir=data_dir, download=False)
    assert holds_class_0_of(ds.images, upstream)
    assert own_warnings(caplog) == []
    # --no-verify over upstream's own files keeps upstream's key and counts them as verified
    [again] = gf.prepare_fashion_mnist(data_dir=data_dir, offline=True, verify=False, progress=False)
    assert again.key == verified.key


def test_given_own_archives_each_get_an_entry_and_the_last_prepared_is_loaded(copies, tmp_path, caplog):
    data_dir = tmp_path / "data"
    entries = {name: prepare_mnist(archives={file: copies[name].path(file) for file in ALL_FILES}, verify=False,
                                   shapes=[(14, 14)], data_dir=data_dir, offline=True, progress=False)
               for name in ("a", "b")}
    keys = {entry.key for found in entries.values() for entry in found}
    assert len(keys) == 4 and upstream_key("mnist") not in keys and upstream_key("mnist", (14, 14)) not in keys
    assert entries["b"][1].meta["resized_from"] == entries["b"][0].key
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        x, _, _ = load_mnist("0", subset="test", data_dir=data_dir, download=False)
    assert holds_class_0_of(x, copies["b"])
    assert any(entries["b"][0].key[:12] in message for message in own_warnings(caplog))


def stored(raw: Path) -> None:
    """Rewrite the four files in ``raw`` gzipped without compression: sets of the same counts are then of the same
    sizes."""
    for name in ALL_FILES:
        (raw / name).write_bytes(gzip_bytes(gzip.decompress((raw / name).read_bytes()), level=0))


@pytest.mark.parametrize("then", ["load", "prepare"])
def test_own_files_replaced_under_the_same_sizes_and_times_are_served_by_their_bytes(copies, tmp_path, then):
    """Issue #42 row 2: B placed over A with A's sizes and modification times kept is B's copy, for loads and
    prepares."""
    data_dir = tmp_path / "data"
    raw = config.raw_dir("mnist", data_dir)
    place(copies["a"], data_dir, "mnist")
    stored(raw)
    prepare_cli("mnist", data_dir)
    times = {name: (raw / name).stat() for name in ALL_FILES}
    place(copies["b"], data_dir, "mnist")
    stored(raw)
    for name, status in times.items():
        assert (raw / name).stat().st_size == status.st_size
        os.utime(raw / name, ns=(status.st_atime_ns, status.st_mtime_ns))

    if then == "prepare":
        prepare_cli("mnist", data_dir)
        x, _, _ = load_mnist("0", subset="test", data_dir=data_dir, download=False)
    else:
        x, _, _ = gf.load("mnist", "0", subset="test", data_dir=data_dir, offline=True)

    assert holds_class_0_of(x, copies["b"])
    assert len(CacheStore.for_data_dir(data_dir).ls()) == 2
