"""`RemoteEntry` against a real S3 server on 127.0.0.1 (moto) and file:// URLs: manifests checked, ranges, downloads."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from glyphforge.cache import CacheStore
from glyphforge.storage import Location
from glyphforge.storage.remote_entry import BrokenRemoteEntryError, RemoteEntry, entry_location

from support.s3_server import s3_server  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def local_entry(tmp_path_factory):
    store = CacheStore(tmp_path_factory.mktemp("store"))
    return store.get_or_create("toy", {"n": 3}, lambda writer: writer.write("A.pklz", np.arange(1000)))


def _upload(entry, location, *, manifest=True):
    fs = location.fs
    fs.makedirs(location.path, exist_ok=True)  # a no-op on S3; file:// needs its folders
    for name in entry.files:
        fs.pipe_file(location.child(name).path, (entry.path / name).read_bytes())
    if manifest:
        fs.pipe_file(location.child("manifest.json").path, (entry.path / "manifest.json").read_bytes())


@pytest.fixture(params=["s3", "file"])
def data_dir(request, tmp_path):
    if request.param == "file":
        return Location(f"file://{tmp_path}/remote")
    return Location(request.getfixturevalue("s3_server").bucket()).child("data")


def test_an_entry_is_read_where_it_lies(local_entry, data_dir, tmp_path):
    location = entry_location(data_dir, local_entry.kind, local_entry.key)
    assert RemoteEntry.open(location) is None
    _upload(local_entry, location, manifest=False)
    assert RemoteEntry.open(location) is None  # data without its manifest: not an entry yet
    _upload(local_entry, location)
    remote = RemoteEntry.open(location)
    assert remote is not None
    assert (remote.kind, remote.key, remote.files, remote.params) == ("toy", local_entry.key, ["A.pklz"], {"n": 3})
    data = (local_entry.path / "A.pklz").read_bytes()
    assert remote.read_range("A.pklz", 5, 100) == data[5:105]
    got = remote.download("A.pklz", tmp_path / "A.pklz")
    assert hashlib.sha256(got.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    with pytest.raises(KeyError, match="has no file 'B.pklz'"):
        remote.read_range("B.pklz", 0, 1)
    with pytest.raises(ValueError, match="outside A.pklz"):
        remote.read_range("A.pklz", len(data) - 1, 2)


def test_a_damaged_remote_entry_is_named(local_entry, data_dir, tmp_path):
    location = entry_location(data_dir, local_entry.kind, local_entry.key)
    _upload(local_entry, location)
    location.fs.pipe_file(location.child("A.pklz").path, b"not the data")
    remote = RemoteEntry.open(location)
    assert remote is not None
    with pytest.raises(BrokenRemoteEntryError, match=r"A.pklz is shorter than the .* bytes its manifest records: the "
                                                     "store holds 12 bytes, and none of them were fetched"):
        remote.download("A.pklz", tmp_path / "A.pklz")
    assert not (tmp_path / "A.pklz").exists()
    data = (local_entry.path / "A.pklz").read_bytes()
    location.fs.pipe_file(location.child("A.pklz").path, data[:-1] + bytes([data[-1] ^ 1]))  # same size
    with pytest.raises(BrokenRemoteEntryError, match=f"{len(data):,} bytes with sha256"):
        remote.download("A.pklz", tmp_path / "A.pklz")
    assert not (tmp_path / "A.pklz").exists()
    manifest = json.loads((local_entry.path / "manifest.json").read_text())
    manifest["params"] = {"n": 4}
    location.fs.pipe_file(location.child("manifest.json").path, json.dumps(manifest).encode())
    with pytest.raises(BrokenRemoteEntryError, match=r"manifest.json is not a valid manifest: its key is not the hash"):
        RemoteEntry.open(location)
