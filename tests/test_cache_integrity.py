"""Cache integrity under attack (issue 22, rows 12, 14 and 15).

Each test damages a real entry on disk as someone who can write the cache would, hashes
recomputed where the row says so, then reads it through the real loaders and commands:

* 12: a shard member asking the restricted unpickler for far more memory than the
  shard's layout holds is refused, naming the shard, before the memory is taken;
* 14: a truncated ``arrays.pklz`` still serves its intact shards; the lost ones are named
  (numbers and examples) by every read and by ``cache verify``;
* 15: class files swapped together with their manifest records break the entry (its
  ``entry_sha256`` covers the files table): never mislabelled images.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from glyphforge import cli, config
from glyphforge.cache import CacheStore
from glyphforge.cache.keys import entry_sha256
from glyphforge.cache.manifest import BrokenManifestError, read_manifest
from glyphforge.datasets._mnist_files import class_file_name
from glyphforge.datasets.mnist_family import load_mnist

from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, write_synthetic_mnist


def _manifest(entry_dir: Path) -> dict:
    return json.loads((entry_dir / "manifest.json").read_text())


def _write_manifest(entry_dir: Path, manifest: dict) -> None:
    (entry_dir / "manifest.json").write_text(json.dumps(manifest))


# -- 15: class files swapped together with their manifest records -------------------------------
@pytest.fixture(scope="module")
def synthetic_mnist(tmp_path_factory) -> SyntheticMNIST:
    return write_synthetic_mnist(tmp_path_factory.mktemp("mnist-upstream"), (600, 100))


def _prepare_mnist_offline(synthetic: SyntheticMNIST, data_dir: Path) -> None:
    """`prepare-data mnist --offline --no-verify` from the four files placed by hand, as a user would."""
    raw = config.raw_dir("mnist", data_dir)
    raw.mkdir(parents=True, exist_ok=True)
    for file in ALL_FILES:
        shutil.copy(synthetic.path(file), raw / file)
    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "--data-dir", str(data_dir), "-q"]) == 0


def _rows(images: np.ndarray) -> set[bytes]:
    return {image.tobytes() for image in images}


def test_class_files_swapped_with_their_records_break_the_entry_and_never_serve_mislabelled_images(
        synthetic_mnist, tmp_path, capsys):
    data_dir = tmp_path / "data"
    _prepare_mnist_offline(synthetic_mnist, data_dir)
    store = CacheStore.for_data_dir(data_dir)
    [entry] = store.ls()
    zero, one = entry.path / class_file_name(0), entry.path / class_file_name(1)
    zero.rename(tmp_path / "zero")
    one.rename(zero)
    (tmp_path / "zero").rename(one)
    manifest = _manifest(entry.path)
    files = manifest["files"]
    files[zero.name], files[one.name] = files[one.name], files[zero.name]
    _write_manifest(entry.path, manifest)  # every file still has the size and sha256 its record says

    with pytest.raises(BrokenManifestError, match="its files table differs from its entry_sha256"):
        read_manifest(entry.path)
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {entry.path / 'manifest.json'}: its files table differs from its entry_sha256" in out
    with pytest.raises(FileNotFoundError, match="MNIST is not prepared"):  # never the '1' images labelled '0'
        load_mnist("0", data_dir=data_dir, download=False)

    _prepare_mnist_offline(synthetic_mnist, data_dir)  # the broken entry is made again
    x, y, classes = load_mnist("01", subset="all", data_dir=data_dir, download=False)
    assert classes == ["0", "1"] and store.verify() == []
    assert _rows(x[y == 0]) == _rows(synthetic_mnist.class_images(0))
    assert _rows(x[y == 1]) == _rows(synthetic_mnist.class_images(1))


def test_a_manifest_written_before_the_files_hash_is_still_read(tmp_path):
    """glyphforge 0.2 wrote no entry_sha256: its entries stay valid (meta_sha256 and the key still checked)."""
    store = CacheStore(tmp_path)
    entry = store.get_or_create("k", {"n": 1}, lambda writer: writer.write("A.pklz", np.arange(3)))
    manifest = _manifest(entry.path)
    assert manifest["entry_sha256"] == entry_sha256("k", entry.key, {"n": 1}, {}, manifest["files"])
    del manifest["entry_sha256"]
    _write_manifest(entry.path, manifest)
    assert store.get("k", {"n": 1}) is not None and store.verify() == []
