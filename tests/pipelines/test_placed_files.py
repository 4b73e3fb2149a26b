"""Issue #22 row 4: a file the user placed in ``<data dir>/raw/`` is never deleted or overwritten.

A file in place with the wrong hash was not written by glyphforge (it renames only verified
downloads into place): the run fails naming its hash and upstream's, the file stays byte for
byte, and ``--no-verify`` then uses it. glyphforge's own downloads with the wrong hash are
still removed. MNIST runs through the real ``prepare-data`` with synthetic files in MNIST's
format (wrong hashes for the shipped pins); every other dataset through its ``prepare``.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from glyphforge import config
from glyphforge.cache import CacheStore
from glyphforge.datasets import backgrounds, emnist, mnist, registry
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.omniglot import dataset as omniglot
from glyphforge.pipelines.resource import HashMismatchError, Resource

from support.cli import run
from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, mnist_family, write_synthetic_mnist

DATASETS = mnist_family()
MNIST = DATASETS["mnist"]
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> SyntheticMNIST:
    """MNIST-format files that are not MNIST's (module-wide: tests copy them, never change them)."""
    return write_synthetic_mnist(tmp_path_factory.mktemp("synthetic-mnist"))


def place(synthetic: SyntheticMNIST, data_dir: Path) -> dict[Path, str]:
    """Copy the four files into ``<data dir>/raw/mnist/`` as a user would; return ``{path: sha256}``."""
    raw = config.raw_dir("mnist", data_dir)
    raw.mkdir(parents=True)
    for name in ALL_FILES:
        (raw / name).write_bytes(synthetic.data(name))
    return sha256s(raw / name for name in ALL_FILES)


def sha256s(paths) -> dict[Path, str]:
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def visible_files(directory: Path) -> list[str]:
    """The files in ``directory`` but the hidden per-file locks."""
    return sorted(path.name for path in directory.iterdir() if not path.name.startswith("."))


def assert_refused(result, synthetic: SyntheticMNIST, data_dir: Path, placed: dict[Path, str]) -> None:
    """The run failed on the first placed file, changed none, and named both hashes and what to do."""
    assert result.returncode == 1, result.stderr
    assert sha256s(placed) == placed
    assert visible_files(config.raw_dir("mnist", data_dir)) == sorted(ALL_FILES)
    assert CacheStore.for_data_dir(data_dir).ls() == []
    first = config.raw_dir("mnist", data_dir) / TRAIN_IMAGES
    assert (
        f"error: {first} is not {MNIST.resources[TRAIN_IMAGES].url}: its hash is md5:{synthetic.md5[TRAIN_IMAGES]} "
        f"({synthetic.size[TRAIN_IMAGES]:,} bytes), expected md5:f68b3c2dcbeaaa9fbdd348bbdeb94873 (9,912,422 bytes). "
        "glyphforge leaves it as it is: it never deletes or overwrites a file it did not download itself"
    ) in result.stderr
    assert "To use it as your own copy, pass verify=False (on the command line: --no-verify)" in result.stderr
    assert f"move it away (e.g. to {TRAIN_IMAGES}.mine) and run again" in result.stderr
    assert "deleted" not in result.stderr


def test_offline_keeps_wrong_placed_files_and_no_verify_uses_them(synthetic, tmp_path):
    data_dir = tmp_path / "data"
    placed = place(synthetic, data_dir)
    refused = run("prepare-data", "mnist", "--offline", "--data-dir", data_dir, "--no-warmup", "-q")
    assert_refused(refused, synthetic, data_dir, placed)

    used = run("prepare-data", "mnist", "--offline", "--no-verify", "--data-dir", data_dir, "--no-warmup", "-q")
    assert used.returncode == 0, used.stderr
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    assert entry.meta["verified"] is False and entry.meta["n_images"] == 700
    assert sha256s(placed) == placed


def test_online_a_wrong_placed_file_is_not_downloaded_over(synthetic, tmp_path, http_server):  # noqa: F811
    for name in ALL_FILES:
        http_server.add(f"mnist/{name}", synthetic.data(name))
    data_dir = tmp_path / "data"
    placed = place(synthetic, data_dir)
    refused = run("prepare-data", "mnist", "--mirror", http_server.base_url, "--data-dir", data_dir,
                  "--no-warmup", "-q")
    assert_refused(refused, synthetic, data_dir, placed)
    assert http_server.requests() == 0  # refused before any source: no download could replace it


def test_a_corrupted_download_is_still_removed(synthetic, tmp_path, http_server, monkeypatch):  # noqa: F811
    """Pinned to the synthetic files and served by the local server, which flips a byte of one."""
    resources = {name: dataclasses.replace(resource, url=http_server.url(f"mnist/{name}"), more_urls=(),
                                           hash=f"md5:{synthetic.md5[name]}", size=synthetic.size[name])
                 for name, resource in MNIST.resources.items()}
    counts = {"default": dataclasses.replace(MNIST.configs["default"], n_images=(600, 100))}
    monkeypatch.setitem(DECLARATIONS, "mnist", dataclasses.replace(MNIST, resources=resources, configs=counts))
    for name in ALL_FILES:
        http_server.add(f"mnist/{name}", synthetic.data(name))
    http_server.corrupt(f"mnist/{TRAIN_IMAGES}")
    with pytest.raises(HashMismatchError, match=r"; the bad download was deleted\n") as caught:
        mnist.prepare_mnist(data_dir=tmp_path, progress=False)
    assert caught.value.url == http_server.url(f"mnist/{TRAIN_IMAGES}")
    raw = config.raw_dir("mnist", tmp_path)
    assert visible_files(raw) == []  # neither the file nor its .part
    assert http_server.requests(f"mnist/{TRAIN_IMAGES}") == 1


def upstream_files(dataset: str) -> list[Resource]:
    """Every upstream file ``dataset`` may fetch."""
    if dataset in DATASETS:
        return list(DATASETS[dataset].resources.values())
    return {"emnist": [emnist.EMNIST_ZIP], "omniglot": list(omniglot.RESOURCES.values()),
            "backgrounds": list(backgrounds.IMAGES.values())}[dataset]


@pytest.mark.parametrize("dataset", registry.registered())
def test_every_dataset_keeps_a_wrong_placed_file(dataset, tmp_path):
    placed = []
    for resource in upstream_files(dataset):
        path = config.raw_dir(dataset, tmp_path) / resource.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"my own {resource.filename}".encode())
        placed.append(path)
    before = sha256s(placed)
    prepare = registry.resolve(registry.get(dataset).prepare)
    with pytest.raises(HashMismatchError) as caught:
        prepare(shapes=(), data_dir=tmp_path, mirrors=None, verify=True, progress=False, offline=True)
    assert sha256s(placed) == before
    assert caught.value.target in placed
    assert f"its hash is {caught.value.actual}" in str(caught.value) and caught.value.actual != caught.value.expected
    assert "pass verify=False (on the command line: --no-verify)" in str(caught.value)
