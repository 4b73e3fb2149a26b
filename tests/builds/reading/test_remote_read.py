"""Built datasets read where they lie: S3 (moto on 127.0.0.1) and HTTP (the project's Range server), with faults.

One small build (1,030 rows in 11 shards) is made and uploaded once per module (data files
first, manifest last); every test opens it with a fresh local cache dir (conftest).
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import build
from glyphforge.builds.reading.index import INDEX_FILE
from glyphforge.builds.reading.lookup import find_built
from glyphforge.builds.reading.remote_shards import RemoteShards
from glyphforge.cache import DamagedPklzError, Entry
from glyphforge.cache.manifest import make_manifest
from glyphforge.cache.remote.files import DamagedRemoteEntryError
from glyphforge.storage import Location
from glyphforge.storage.reads import RemoteAccessError, RemoteFileMissingError, RemoteReadError
from glyphforge.storage.shard_cache import ShardCache

from support.cli import run, run_here
from support.http_server import LocalHTTPServer
from support.optional import NO_TORCH
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

ARRAYS = "arrays.pklz"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The local build: its dataset, its arrays, its data dir."""
    data_dir = tmp_path_factory.mktemp("built")
    dataset = build(RowSpec(), data_dir=data_dir, progress=False)
    return dataset, dataset.reopened().arrays, data_dir


def upload(entry_dir, location: Location) -> None:
    """Put an entry's data files, then its manifest, at ``location`` (as a publisher does)."""
    fs = location.fs
    names = sorted(path.name for path in entry_dir.iterdir() if path.name != "manifest.json")
    for name in [*names, "manifest.json"]:
        fs.pipe_file(location.child(name).path, (entry_dir / name).read_bytes())


@pytest.fixture(scope="module")
def s3_data(built, s3_server):
    """The data dir URL on S3 holding the build, and the entry's URL."""
    dataset = built[0]
    data_dir = s3_server.bucket() + "/data"
    entry = f"{data_dir}/cache/{dataset.entry.kind}/{dataset.key}"
    upload(dataset.path, Location(entry))
    return data_dir, entry


@pytest.fixture(scope="module")
def http(built):
    """The project's HTTP server serving the build's data dir."""
    with LocalHTTPServer(directory=built[2]) as server:
        yield server


def http_entry(http, dataset) -> tuple[str, str]:
    """The entry's URL on the HTTP server and the server path of its arrays.pklz."""
    path = f"cache/{dataset.entry.kind}/{dataset.key}"
    return http.url(path), f"{path}/{ARRAYS}"


def rows_equal(got: dict, arrays: dict, rows) -> None:
    for name, array in arrays.items():
        assert np.array_equal(got[name], array[rows]), name


# -- the same dataset ------------------------------------------------------------------------
def test_a_dataset_on_s3_reads_as_the_local_one(built, s3_data, tmp_path):
    local, arrays, _ = built
    ds = gf.open_built(s3_data[1])
    assert isinstance(ds.source, RemoteShards) and ds.url == s3_data[1]
    assert (len(ds), ds.key, ds.metadata, ds.image_name, ds.layout) == (
        1030, local.key, local.metadata, local.image_name, local.layout)
    image, targets = ds[1029]
    assert np.array_equal(image, arrays[ds.image_name][1029])
    rows_equal(ds.take([999, 3, 512, 3, -1]), arrays, [999, 3, 512, 3, 1029])
    images, _ = ds[95:105]
    assert np.array_equal(images, arrays[ds.image_name][95:105])
    assert sum(1 for _ in ds) == 1030
    for name, array in ds.reopened().arrays.items():
        assert np.array_equal(array, arrays[name])
    seen = np.concatenate([batch[0] for batch in ds.stream(100, shuffle=True, seed=3)])
    assert sorted(map(bytes, seen)) == sorted(map(bytes, arrays[ds.image_name]))
    out = ds.export(tmp_path / "out")
    for name, array in arrays.items():
        assert np.array_equal(np.load(out / f"{name}.npy"), array)


def test_a_stream_resumes_over_s3_as_on_disk(built, s3_data):
    local = built[0]
    ds = gf.open_built(s3_data[1])
    stream = ds.stream(64, seed=5, world_size=2, rank=1)
    iterator = iter(stream)
    next(iterator)
    state = stream.state_dict()
    rest = [batch[0] for batch in ds.stream(64, seed=5, world_size=2, rank=1, resume=state)]
    expected = [batch[0] for batch in local.stream(64, seed=5, world_size=2, rank=1, resume=state)]
    assert len(rest) == len(expected) and all(np.array_equal(a, b) for a, b in zip(rest, expected, strict=True))


# -- what is fetched -------------------------------------------------------------------------
def test_one_row_over_http_fetches_its_shard_only_and_the_second_read_is_local(built, http):
    local, arrays, _ = built
    url, arrays_path = http_entry(http, local)
    shard = int(local.index.length[7])
    before = http.bytes_served(arrays_path)
    ds = gf.open_built(url)
    image, _ = ds[750]  # shard 7
    assert np.array_equal(image, arrays[ds.image_name][750])
    assert http.bytes_served(arrays_path) - before == shard
    requests = http.requests()
    ds[799], ds.take([701, 702])  # the same shard: from the local cache
    gf.open_built(url)[777]  # a new reader: its manifest again, the index and the shard from the cache
    assert http.requests() == requests + 1
    assert http.bytes_served(arrays_path) - before == shard


def test_the_same_entry_from_two_urls_is_one_copy(built, http, s3_data):
    local = built[0]
    url, arrays_path = http_entry(http, local)
    list(gf.open_built(s3_data[1]))  # every shard, from S3
    before = http.bytes_served(arrays_path)
    ds = gf.open_built(url)
    assert sum(1 for _ in ds) == 1030
    assert http.bytes_served(arrays_path) == before
    folder = ShardCache(Path(os.environ["GLYPHFORGE_CACHE_DIR"])).folder(local.entry.kind, local.key)
    assert folder == ds.path and len(list(folder.glob("*.shard"))) == len(local.index)


def test_the_shard_cache_keeps_to_its_size_and_removes_only_its_shards(built, s3_data):
    local = built[0]
    lengths = local.index.length
    limit = int(lengths[:3].sum())
    ds = gf.open_built(s3_data[1], cache_size=limit, random_access="decode", cache_shards=0)
    foreign = ds.path / "notes.txt"
    foreign.write_text("mine")
    for number in range(8):
        ds.shard(number)
    kept = {path.name for path in ds.path.glob("*.shard")}
    assert sum((ds.path / name).stat().st_size for name in kept) <= limit
    newest = f"{ARRAYS}.{lengths[:7].sum()}-{lengths[7]}.shard"
    assert newest in kept and f"{ARRAYS}.0-{lengths[0]}.shard" not in kept
    assert foreign.read_text() == "mine" and (ds.path / "index.npy").exists()
    assert not [path for path in ds.path.iterdir() if path.name.endswith(".tmp")]


def test_a_stream_prefetches_runs_of_shards_once_and_its_threads_end(built, http):
    local, arrays, _ = built
    url, arrays_path = http_entry(http, local)
    size = (local.path / ARRAYS).stat().st_size
    before = http.requests(arrays_path), http.bytes_served(arrays_path)
    # one lane, one turn: each shard in one window (parts cut shards, whose two reads may be far apart in an epoch)
    options = dict(window=2, partitions=1, turns=1)
    ds = gf.open_built(url, prefetch_threads=3)  # the entry fits in the cache: one run of every shard
    assert sum(len(batch[0]) for batch in ds.stream(50, **options)) == 1030
    assert (http.requests(arrays_path), http.bytes_served(arrays_path)) == (before[0] + 1, before[1] + size)
    again = gf.open_built(url, prefetch_threads=3, cache_dir=ds.path.parents[3] / "small", cache_size=size)
    assert sum(len(batch[0]) for batch in again.stream(50, **options)) == 1030  # over half the cache: shard by shard
    assert (http.requests(arrays_path), http.bytes_served(arrays_path)) == (
        before[0] + 1 + len(local.index), before[1] + 2 * size)
    assert any(thread.name.startswith("glyphforge-prefetch") for thread in threading.enumerate())
    ds.close()
    del ds, again  # `again` is not closed: garbage collection ends its threads
    gc.collect()
    for thread in threading.enumerate():
        if thread.name.startswith("glyphforge-prefetch"):
            thread.join(timeout=30)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("glyphforge-prefetch")]


# -- faults ----------------------------------------------------------------------------------
@pytest.fixture
def server(built):
    """A fresh HTTP server of the build (its faults die with it) and the entry's URL and arrays path."""
    with LocalHTTPServer(directory=built[2]) as fresh:
        yield (fresh, *http_entry(fresh, built[0]))


def shards_kept(ds) -> list[str]:
    return sorted(path.name for path in ds.path.iterdir() if path.name.endswith((".shard", ".tmp")))


def test_503s_and_a_dropped_connection_are_retried(built, server):
    http, url, arrays_path = server
    arrays = built[1]
    ds = gf.open_built(url)
    http.fail(arrays_path, 503, times=2, retry_after="0")
    assert np.array_equal(ds[5][0], arrays[ds.image_name][5])
    assert http.requests(arrays_path) == 3
    http.drop_after(arrays_path, 1000)
    assert np.array_equal(ds[205][0], arrays[ds.image_name][205])
    assert http.requests(arrays_path) == 5


def test_a_server_failing_for_good_is_named_and_nothing_partial_is_kept(built, server):
    http, url, arrays_path = server
    ds = gf.open_built(url)
    http.fail(arrays_path, 503, times=None, retry_after="0")
    with pytest.raises(RemoteReadError, match=rf"could not read bytes .* of {url}/{ARRAYS} \(shard 3 of the "
                                              r"test-rows entry .*503 Service Unavailable, 5 times in a row.*try "
                                              "again"):
        ds[300]
    assert http.requests(arrays_path) == 5 and shards_kept(ds) == []


@pytest.mark.slow
def test_connections_dropped_for_good_are_named_and_nothing_partial_is_kept(server):
    http, url, arrays_path = server
    ds = gf.open_built(url)
    http.drop_after(arrays_path, 500, times=5)
    with pytest.raises(RemoteReadError, match=r"shard 3 .*the connection was closed before the whole answer came, "
                                              "5 times in a row"):
        ds[300]
    assert http.requests(arrays_path) == 5 and shards_kept(ds) == []


def test_a_lost_file_refused_credentials_and_ignored_ranges_are_not_retried(built, server):
    http, url, arrays_path = server
    ds = gf.open_built(url)
    http.fail(arrays_path, 404, times=1)
    with pytest.raises(RemoteFileMissingError, match=rf"entry at {url} lost its file {ARRAYS}.*Its manifest is still "
                                                     rf"there. .*delete everything under {url}/ with the store's own"):
        ds[0]
    http.fail(arrays_path, 403, times=1)
    with pytest.raises(RemoteAccessError, match=r"access was refused \(HTTP 403 Forbidden\).*AWS_ACCESS_KEY_ID"):
        ds[0]
    http.ignore_range(arrays_path)
    with pytest.raises(RemoteReadError, match="ignores Range requests .*200 with the whole file"):
        ds[0]
    assert http.requests(arrays_path) == 3 and shards_kept(ds) == []


def test_a_damaged_shard_is_fetched_again_and_a_damaged_entry_is_named(built, server):
    http, url, arrays_path = server
    local, arrays, _ = built
    ds = gf.open_built(url, cache_shards=0, random_access="decode")
    ds[5]
    (cached,) = ds.path.glob("*.shard")
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cached.write_bytes(bytes(data))  # the disk damaged the local copy
    assert np.array_equal(ds[5][0], arrays[ds.image_name][5])
    assert http.requests(arrays_path) == 2 and cached.read_bytes() != bytes(data)
    size = (local.path / ARRAYS).stat().st_size
    middle = int(np.searchsorted(local.index.offset + local.index.length, size // 2, side="right"))
    http.corrupt(arrays_path, ranges_only=True)  # the server serves a damaged byte in shard `middle`
    with pytest.raises(DamagedPklzError, match=rf"shard {middle} of the test-rows entry at {url} is damaged: fetched "
                                               "twice.*nothing of it is kept"):
        ds[int(local.index.start[middle])]
    assert shards_kept(ds) == [cached.name]


def test_an_entry_at_a_url_is_the_one_entry_its_data_files_fetched_into_the_shard_cache(built, s3_data):
    local = built[0]
    ds = gf.open_built(s3_data[1])
    assert type(ds.entry) is type(local.entry) is Entry
    assert ds.entry.manifest == local.entry.manifest and ds.entry.path != local.entry.path
    assert ds.entry.file(INDEX_FILE) == ds.path / INDEX_FILE  # fetched whole into its folder of the shard cache
    assert (ds.path / INDEX_FILE).read_bytes() == local.entry.file(INDEX_FILE).read_bytes()
    with pytest.raises(KeyError, match="has no file 'nope'"):
        ds.entry.file("nope")


def test_a_damaged_local_copy_of_the_index_is_fetched_again(built, s3_data):
    local, arrays, _ = built
    ds = gf.open_built(s3_data[1])
    ds[0]
    copy = ds.path / INDEX_FILE
    whole = copy.read_bytes()
    copy.write_bytes(whole[:-1] + bytes([whole[-1] ^ 0x40]))  # the disk damaged the last shard's stop row

    again = gf.open_built(s3_data[1])
    assert np.array_equal(again[1029][0], arrays[again.image_name][1029])
    assert copy.read_bytes() == whole


def test_a_damaged_index_at_the_url_says_what_to_do_there_not_cache_rm(built, s3_server, tmp_path):
    local = built[0]
    entry = f"{s3_server.bucket()}/data/cache/{local.entry.kind}/{local.key}"
    damaged = (local.path / INDEX_FILE).read_bytes()
    damaged = damaged[:-1] + bytes([damaged[-1] ^ 0x40])  # published so: its manifest records these bytes
    files = {**local.entry.manifest["files"],
             INDEX_FILE: {"size": len(damaged), "sha256": hashlib.sha256(damaged).hexdigest()}}
    manifest = make_manifest(local.entry.kind, local.key, local.entry.params, files, local.entry.meta)
    fs = s3_server.fs()
    fs.pipe_file(f"{entry[5:]}/{ARRAYS}", (local.path / ARRAYS).read_bytes())
    fs.pipe_file(f"{entry[5:]}/{INDEX_FILE}", damaged)
    fs.pipe_file(f"{entry[5:]}/manifest.json", json.dumps(manifest).encode())

    ds = gf.open_built(entry, cache_dir=tmp_path / "cache")
    with pytest.raises(DamagedRemoteEntryError, match=rf"(?s)the test-rows entry at {entry}: its shard index "
                                                      rf"index.npy does not tile the data.*delete everything under "
                                                      rf"{entry}/ with the "
                                                      "store's own tools, then publish it again") as raised:
        ds[0]
    assert "cache rm" not in str(raised.value)
    assert not (ds.path / INDEX_FILE).exists()  # what the URL holds, rejected: not kept in the local cache


def test_a_slow_server_is_waited_for(built, server):
    http, url, arrays_path = server
    http.drip(arrays_path, 4096, 0.002)
    ds = gf.open_built(url)
    assert np.array_equal(ds[1029][0], built[1][ds.image_name][1029])


def test_an_object_deleted_while_a_stream_reads_is_named(built, s3_server):
    local = built[0]
    entry = f"{s3_server.bucket()}/data/cache/{local.entry.kind}/{local.key}"
    upload(local.path, Location(entry))
    ds = gf.open_built(entry, prefetch_threads=1, cache_size=(local.path / ARRAYS).stat().st_size)  # shard by shard
    batches = iter(ds.stream(100, window=1, shuffle=False))
    next(batches)
    s3_server.fs().rm(f"{entry[5:]}/{ARRAYS}")
    with pytest.raises(RemoteFileMissingError, match=rf"entry at {entry} lost its file {ARRAYS}"):
        list(batches)


def test_a_missing_bucket_and_a_missing_entry_are_named(s3_server, built):
    local = built[0]
    with pytest.raises(RemoteFileMissingError, match="the bucket does not exist") as raised:
        gf.open_built(f"s3://gf-no-such-bucket/data/cache/test-rows/{local.key}")
    assert raised.value.no_bucket  # s3fs says so in words: no listing more, unlike gs://
    with pytest.raises(LookupError, match=r"no built dataset at s3://.*: it has no manifest.json"):
        gf.open_built(f"{s3_server.bucket()}/data/cache/test-rows/{local.key}")
    with pytest.raises(LookupError, match="is not the URL of an entry"):
        gf.open_built(s3_server.bucket())
    with pytest.raises(LookupError, match="is not the URL of an entry"):  # never a folder outside the shard cache
        gf.open_built(f"{s3_server.bucket()}/data/cache/../{local.key}")



def test_wrong_credentials_are_named_without_the_secret(s3_data, s3_server):
    refused = r"manifest.json .*access was refused .*AWS_ACCESS_KEY_ID"
    with s3_server.checking_credentials(), pytest.raises(RemoteAccessError, match=refused) as raised:
        gf.open_built(s3_data[1], storage_options={"key": "AKIAWRONGKEY", "secret": "wrong-Zq8rT2"})
    assert "wrong-Zq8rT2" not in str(raised.value)


def test_incomplete_credentials_are_named_without_the_secret(s3_data):
    with pytest.raises(RemoteAccessError, match=r"manifest.json .*access was refused \(PartialCredentialsError: "
                                                r"Partial credentials found in explicit, missing: aws_access_key_id\)"
                                                r".*AWS_ACCESS_KEY_ID") as raised:
        gf.open_built(s3_data[1], storage_options={"secret": "hush-hush"})
    assert "hush-hush" not in str(raised.value)


# -- handles ---------------------------------------------------------------------------------
def test_a_pickled_dataset_is_a_handle_without_secrets(built, s3_data, s3_server):
    arrays = built[1]
    secret = "do-not-pickle-me"
    ds = gf.open_built(s3_data[1], storage_options={"endpoint_url": s3_server.endpoint, "secret": secret,
                                                    "key": "test"}, cache_shards=2)
    data = pickle.dumps(ds)
    assert secret.encode() not in data and len(data) < 2000 and s3_data[1].encode() in data
    assert os.environ["GLYPHFORGE_CACHE_DIR"].encode() not in data  # not given: the unpickling process's own
    again = pickle.loads(data)
    assert isinstance(again.source, RemoteShards) and again.cache_shards == 2
    assert np.array_equal(again[600][0], arrays[ds.image_name][600])


# -- finding entries -------------------------------------------------------------------------
def test_find_built_lists_a_data_dir_on_s3(built, s3_data, http, monkeypatch, tmp_path):
    local = built[0]
    data_dir, entry = s3_data
    assert find_built("test-rows", data_dir=data_dir).url == entry
    with monkeypatch.context() as patched:
        patched.setenv("GLYPHFORGE_DATA_DIR", data_dir)
        assert find_built("test-rows").url == entry  # the environment's data dir, a URL
    shard_cache = tmp_path / "local-cache"  # a context's local cache dir keeps the shards read
    found = find_built("test-rows", context=gf.DataContext.resolve(data_dir=data_dir, cache_dir=shard_cache))
    assert found.url == entry and found[0][0].shape and (shard_cache / "shards").is_dir()
    assert find_built("test-rows", context=gf.DataContext.resolve(data_dir=built[2])).key == local.key
    assert find_built(local.key[:8], data_dir=data_dir).url == entry
    assert find_built(f"test-rows/{local.key}", data_dir=http.base_url).url == http_entry(http, local)[0]
    with pytest.raises(LookupError, match=r"no built dataset 'nothing' in s3://.*/cache: .* it holds test-rows"):
        find_built("nothing", data_dir=data_dir)
    with pytest.raises(LookupError, match="cannot be listed .*kind/key"):
        find_built("test-rows", data_dir=http.base_url)
    with pytest.raises(ValueError, match="cache_dir: only for a data dir that is a URL"):
        find_built("test-rows", data_dir=built[2], cache_dir="elsewhere")


def test_the_shard_cache_size_comes_from_the_argument_the_environment_or_the_disk(monkeypatch, tmp_path):
    disk = shutil.disk_usage(tmp_path).total
    assert ShardCache(tmp_path).size == min(20 * 10**9, int(disk * 0.1))
    assert ShardCache(tmp_path, "2GB").size == 2 * 10**9
    monkeypatch.setenv("GLYPHFORGE_CACHE_SIZE", "1.5GiB")
    assert ShardCache(tmp_path).size == int(1.5 * 2**30) and ShardCache(tmp_path, 1000).size == 1000
    monkeypatch.setenv("GLYPHFORGE_CACHE_SIZE", "lots")
    assert ShardCache(tmp_path, 1000).size == 1000  # a size given: the environment is not read
    with pytest.raises(ValueError, match=r"\$GLYPHFORGE_CACHE_SIZE: 'lots' is not a size"):
        assert ShardCache(tmp_path).size


def test_the_cli_exports_and_previews_a_dataset_on_s3(built, s3_data, tmp_path):
    arrays = built[1]
    exported = run_here("glyphforge", "export", "test-rows", tmp_path / "out", "--data-dir", s3_data[0])
    assert exported.returncode == 0, exported.stderr
    for name, array in arrays.items():
        assert np.array_equal(np.load(tmp_path / "out" / f"{name}.npy"), array)
    shown = run_here("glyphforge", "preview", "test-rows", "--out", tmp_path / "p.png", "-n", "4",
                     "--data-dir", s3_data[0])
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    in_environment = {"GLYPHFORGE_DATA_DIR": s3_data[0]}
    from_environment = run_here("glyphforge", "export", "test-rows", tmp_path / "env", env=in_environment)
    assert from_environment.returncode == 0, from_environment.stderr  # the export's checks need no local data dir
    assert np.array_equal(np.load(tmp_path / "env" / "images.npy"), arrays["images"])
    missing = run_here("glyphforge", "export", "nothing", tmp_path / "none", "--data-dir", s3_data[0])
    assert missing.returncode == 2 and "no built dataset 'nothing'" in missing.stderr
    assert not (tmp_path / "none").exists()
    no_credentials = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_EC2_METADATA_DISABLED": "true",
                      "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    # a real process: fsspec's filesystems of this one hold the server's credentials
    refused = run("glyphforge", "export", "test-rows", tmp_path / "none", "--data-dir", s3_data[0], env=no_credentials)
    assert refused.returncode == 1 and not (tmp_path / "none").exists()
    assert f"could not list {s3_data[0]}/cache: access was refused (NoCredentialsError" in refused.stderr
    assert "AWS_ACCESS_KEY_ID" in refused.stderr


def test_the_cli_over_http_takes_kind_and_key_and_refuses_a_kind_alone(built, http, tmp_path):
    local, arrays, _ = built
    shown = run_here("glyphforge", "preview", f"test-rows/{local.key}", "--out", tmp_path / "p.png", "-n", "2",
                     "--data-dir", http.base_url)
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = http.requests()
    refused = run_here("glyphforge", "export", "test-rows", tmp_path / "out", "--data-dir", http.base_url)
    assert refused.returncode == 2 and http.requests() == before and not (tmp_path / "out").exists()
    assert f"{http.base_url} cannot be listed (over HTTP there is no listing)" in refused.stderr
    assert "give the entry as kind/key with its whole key" in refused.stderr


def test_an_entry_on_disk_opens_too(built):
    local, arrays, _ = built
    ds = gf.open_built(local.path)
    assert type(ds) is type(local) and np.array_equal(ds[3][0], arrays[ds.image_name][3])
    assert ds.path == local.path


# -- DataLoader workers --------------------------------------------------------------------------
@pytest.mark.slow
def test_dataloader_workers_read_from_s3_with_their_own_credentials(built, s3_data):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    arrays = built[1]
    ds = gf.open_built(s3_data[1], storage_options={"key": "test", "secret": "not-for-workers"})
    next(iter(ds.stream(64, window=2)))  # the parent has prefetch threads and open connections before forking
    stream = ds.stream(64, seed=4)
    rows = [np.asarray(targets["row"]) for _, targets in
            torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2)]
    expected = [targets["row"] for _, targets in built[0].stream(64, seed=4)]
    assert len(rows) == len(expected) and all(np.array_equal(a, b) for a, b in zip(rows, expected, strict=True))
    spawned = torch.utils.data.DataLoader(ds, batch_size=100, num_workers=1, multiprocessing_context="spawn")
    images = np.concatenate([np.asarray(batch[0]) for batch in spawned])  # unpickled in a fresh process
    assert np.array_equal(images, arrays[ds.image_name])


def test_random_access_over_s3_makes_its_decoded_copy_in_the_local_cache(built, s3_data):
    arrays = built[1]
    ds = gf.open_built(s3_data[1], random_access="materialize")
    rows = np.random.default_rng(0).permutation(1030)[:50]
    rows_equal(ds.take(rows), arrays, rows)
    assert ds.materialized == ds.path.with_name(f"{ds.key}.decoded")
    assert ds.path.is_relative_to(ShardCache(Path(os.environ["GLYPHFORGE_CACHE_DIR"])).root)


def test_dataloader_workers_fetch_each_run_once_between_them(built, http, tmp_path):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    local = built[0]
    url, arrays_path = http_entry(http, local)
    size = (local.path / ARRAYS).stat().st_size
    before = http.bytes_served(arrays_path)
    stream = gf.open_built(url, cache_dir=tmp_path).stream(50, window=2)
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2)
    assert sum(len(images) for images, _ in loader) == 1030
    assert http.bytes_served(arrays_path) - before == size  # runs the workers share (a shard cut by a part's
    # edge, runs of adjacent shards) fetched once between them


def test_runs_of_shards_stay_in_one_data_file_adjacent_and_within_8_mb():
    from glyphforge.builds.reading.shard_fetch import RUN_BYTES, Piece, continues_run

    run = [Piece(0, "part-000000.pklz", 0, 100), Piece(1, "part-000000.pklz", 100, 50)]
    assert continues_run(run, Piece(2, "part-000000.pklz", 150, RUN_BYTES - 150))
    assert not continues_run(run, Piece(2, "part-000000.pklz", 150, RUN_BYTES - 149))  # past 8 MB
    assert not continues_run(run, Piece(2, "part-000001.pklz", 150, 10))  # another part of a multi-part entry
    assert not continues_run(run, Piece(2, "part-000000.pklz", 160, 10))  # not adjacent
