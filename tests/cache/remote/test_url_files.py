"""An entry at a URL (`UrlFiles`) against a real S3 server on 127.0.0.1 (moto) and file:// URLs: manifests checked,
ranges, downloads; the one `Entry`, listed without a local folder."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from glyphforge.cache import CacheStore, Entry
from glyphforge.cache.remote.entries import RemoteCache
from glyphforge.cache.remote.files import DamagedRemoteEntryError, UrlFiles, entry_location
from glyphforge.storage import Location
from glyphforge.storage.shard_cache import ShardCache

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
    files = UrlFiles(location, ShardCache(tmp_path / "local"))
    assert files.open() is None
    _upload(local_entry, location, manifest=False)
    assert files.open() is None  # data without its manifest: not an entry yet
    _upload(local_entry, location)
    remote = files.open()
    assert remote is not None
    assert (remote.kind, remote.key, remote.files, remote.params) == ("toy", local_entry.key, ["A.pklz"], {"n": 3})
    data = (local_entry.path / "A.pklz").read_bytes()
    assert files.read_range(remote, "A.pklz", 5, 100) == data[5:105]
    got = files.download(remote, "A.pklz", tmp_path / "A.pklz")
    assert hashlib.sha256(got.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    with pytest.raises(KeyError, match="has no file 'B.pklz'"):
        files.read_range(remote, "B.pklz", 0, 1)
    with pytest.raises(ValueError, match="outside A.pklz"):
        files.read_range(remote, "A.pklz", len(data) - 1, 2)


def test_a_damaged_remote_entry_is_named(local_entry, data_dir, tmp_path):
    location = entry_location(data_dir, local_entry.kind, local_entry.key)
    _upload(local_entry, location)
    location.fs.pipe_file(location.child("A.pklz").path, b"not the data")
    files = UrlFiles(location, ShardCache(tmp_path / "local"))
    remote = files.open()
    assert remote is not None
    with pytest.raises(DamagedRemoteEntryError, match=r"A.pklz is shorter than the .* bytes its manifest records: the "
                                                      "store holds 12 bytes, and none of them were fetched"):
        files.download(remote, "A.pklz", tmp_path / "A.pklz")
    assert not (tmp_path / "A.pklz").exists()
    data = (local_entry.path / "A.pklz").read_bytes()
    location.fs.pipe_file(location.child("A.pklz").path, data[:-1] + bytes([data[-1] ^ 1]))  # same size
    with pytest.raises(DamagedRemoteEntryError, match=f"{len(data):,} bytes with sha256"):
        files.download(remote, "A.pklz", tmp_path / "A.pklz")
    assert not (tmp_path / "A.pklz").exists()
    manifest = json.loads((local_entry.path / "manifest.json").read_text())
    manifest["params"] = {"n": 4}
    location.fs.pipe_file(location.child("manifest.json").path, json.dumps(manifest).encode())
    with pytest.raises(DamagedRemoteEntryError,
                       match=r"manifest.json is not a valid manifest: its key is not the hash"):
        files.open()


def test_a_store_at_a_url_lists_the_one_entry_type_and_makes_no_local_folder(local_entry, data_dir, tmp_path):
    _upload(local_entry, entry_location(data_dir, local_entry.kind, local_entry.key))
    local = tmp_path / "local"
    [listed] = RemoteCache(data_dir, cache_dir=local).ls()
    [on_disk] = CacheStore(local_entry.path.parents[1]).ls()
    assert isinstance(listed, Entry) and isinstance(on_disk, Entry)
    assert listed.manifest == on_disk.manifest
    assert listed.where == entry_location(data_dir, local_entry.kind, local_entry.key).url
    assert on_disk.where == str(local_entry.path)
    assert listed.path == local / "shards" / "toy" / local_entry.key and not local.exists()  # listing made nothing
    fetched = listed.file("A.pklz")  # the first fetch makes its folder in the shard cache
    assert fetched == listed.path / "A.pklz" and fetched.read_bytes() == (local_entry.path / "A.pklz").read_bytes()
    assert np.array_equal(listed.load("A.pklz"), np.arange(1000))
