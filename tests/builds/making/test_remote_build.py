"""Builds into object storage (#25): a real S3 API (moto's server) on 127.0.0.1 (a ``file://`` data dir is its path).

Entries built into a URL are multi-part (one part per shard, a 5-row index); they are read
here by copying them down into a local data dir, where they are ordinary entries.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import dill
import numpy as np
import pytest

from glyphforge.builds import ShardError, build, cache_params
from glyphforge.builds.making.url_build import (
    RemoteShardTask,
    RemoteStorageError,
    build_into,
    fetch_entries,
)
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.entry_files import DamagedShardsError
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.builds.reading.protocols import ARRAYS_FILE
from glyphforge.cache import CacheStore, MissingEntryFileError
from glyphforge.cache.entry import read_entry
from glyphforge.cache.keys import cache_key
from glyphforge.cache.remote.files import DamagedRemoteEntryError, UrlFiles
from glyphforge.cache.remote.publish import PublishConflictError
from glyphforge.context import DataContext
from glyphforge.errors import StorageError
from glyphforge.scenes.spec import ScatteredGlyphs
from glyphforge.session import open_session
from glyphforge.storage.backend import ReadOnlyStoreError
from glyphforge.storage.location import Location, UnsupportedURLError
from glyphforge.storage.shard_cache import ShardCache

from support.cli import run, run_here
from support.dask_cluster import dask_cluster, wait_for_workers
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NOTES_KIND, TABLE_KIND, NoiseSpec, TableSpec, holder_of, made_shards
from support.store_errors import NO_BUCKET, REFUSED, store_failure
from support.waits import TIMEOUT, wait_until

TESTS_DIR = Path(__file__).resolve().parents[2]
#: A child process imports the support modules and this glyphforge (not an installed one).
CHILD_PATH = os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])
#: 50 examples in shards of 8: 7 shards, the last one short.
SPEC = NoiseSpec(n_examples=50, shard_size=8, seed=5)
PARTS = [f"part-{index:06d}.pklz" for index in range(7)]


def _entry_url(data_url: str, spec) -> str:
    return f"{data_url}/cache/{spec.kind}/{cache_key(spec.kind, cache_params(spec))}"


def _names(fs, url: str) -> list[str]:
    """The names of the objects under ``url``, relative to it."""
    prefix = fs._strip_protocol(url).rstrip("/") + "/"
    fs.invalidate_cache()
    return sorted(path[len(prefix):] for path in fs.find(prefix))


def _copy_down(fs, entry_url: str, data_dir: Path) -> BuiltDataset:
    """Copy the entry at ``entry_url`` into ``data_dir``'s cache (as ``fs.get`` does) and open it there."""
    kind, key = entry_url.rsplit("/", 2)[-2:]
    target = data_dir / "cache" / kind / key
    target.mkdir(parents=True)
    for name in _names(fs, entry_url):
        fs.get_file(f"{entry_url}/{name}", str(target / name))
    entry = read_entry(target)
    assert entry is not None, f"{target} is not a complete entry"
    return BuiltDataset(entry)


def _assert_parts_are_the_local_shards(fs, entry_url: str, local: BuiltDataset) -> None:
    """Each part holds exactly the bytes of the local build's shard (its member of arrays.pklz)."""
    joined = (local.path / ARRAYS_FILE).read_bytes()
    index = local.index
    for number in range(len(index)):
        start = int(index.offset[number])
        part = fs.cat_file(f"{entry_url}/part-{number:06d}.pklz")
        assert part == joined[start:start + int(index.length[number])], f"part {number} differs from the local shard"


def _assert_same_rows(remote: BuiltDataset, local: BuiltDataset) -> None:
    assert len(remote) == len(local) and remote.layout == local.layout and remote.metadata == local.metadata
    for name, array in local.arrays.items():
        assert remote.arrays[name].dtype == array.dtype and remote.arrays[name].tobytes() == array.tobytes()


@pytest.fixture(scope="module")
def local_noise(tmp_path_factory) -> BuiltDataset:
    """`SPEC` built the usual way, on local disk."""
    return build(SPEC, data_dir=tmp_path_factory.mktemp("local"), progress=False)


@pytest.fixture(scope="module")
def s3_noise(s3_server, tmp_path_factory) -> tuple[str, Location, Path]:
    """`SPEC` built into a bucket once: its data dir URL, entry location and the dir recording its make_shard calls."""
    touched = tmp_path_factory.mktemp("made")
    data_url = f"{s3_server.bucket()}/data"
    entry = build_into(replace(SPEC, touch_dir=str(touched)), DataContext.resolve(data_dir=data_url), progress=False)
    return data_url, entry, touched


# -- the layout ----------------------------------------------------------------------------------
def test_a_build_into_s3_writes_a_part_per_shard_its_index_and_manifest_and_removes_its_records(
        s3_server, s3_noise, local_noise):
    data_url, entry, touched = s3_noise
    fs = s3_server.fs()
    assert entry.url == _entry_url(data_url, SPEC)
    assert made_shards(touched) == list(range(7))
    assert _names(fs, data_url) == [f"cache/test-noise/{entry.name}/{name}"
                                     for name in sorted([BLOCKS_FILE, INDEX_FILE, "manifest.json", *PARTS])]
    manifest = json.loads(fs.cat_file(f"{entry.url}/manifest.json"))
    assert manifest["meta"]["parts"] == PARTS and manifest["meta"]["n_shards"] == 7
    for name in [*PARTS, BLOCKS_FILE, INDEX_FILE]:  # the driver never downloaded a part: the records carried these
        data = fs.cat_file(f"{entry.url}/{name}")
        assert manifest["files"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    table = np.load(__import__("io").BytesIO(fs.cat_file(f"{entry.url}/{INDEX_FILE}")))
    assert table.dtype == np.int64 and table.shape == (5, 7)
    assert table[4].tolist() == list(range(7)) and table[0].tolist() == [0] * 7
    assert table[2].tolist() == list(range(0, 50, 8)) and table[3].tolist() == [*range(8, 50, 8), 50]
    # the blocks of each part are where they are in the local build's shards (counted from each shard's first byte)
    assert fs.cat_file(f"{entry.url}/{BLOCKS_FILE}") == (local_noise.path / BLOCKS_FILE).read_bytes()
    _assert_parts_are_the_local_shards(fs, entry.url, local_noise)


def test_the_entry_copied_down_reads_like_the_local_build_row_for_row(s3_server, s3_noise, local_noise, tmp_path):
    remote = _copy_down(s3_server.fs(), s3_noise[1].url, tmp_path / "down")
    assert remote.key == local_noise.key and remote.index.part is not None
    assert CacheStore.for_data_dir(tmp_path / "down").verify() == []
    _assert_same_rows(remote, local_noise.reopened())
    fresh = remote.reopened(random_access="decode")
    for row in (0, 7, 8, 49, -1):
        image, targets = fresh[row]
        expected_image, expected_targets = local_noise[row]
        assert image.tobytes() == expected_image.tobytes() and targets.keys() == expected_targets.keys()
        assert all(targets[name] == expected_targets[name] for name in targets)
    rows = np.random.default_rng(1).permutation(50)
    taken, expected = fresh.take(rows), local_noise.take(rows)
    assert all(taken[name].tobytes() == expected[name].tobytes() for name in expected)
    batches = list(fresh.stream(16, seed=3))
    expected_batches = list(local_noise.stream(16, seed=3))
    assert len(batches) == len(expected_batches) == 4
    for (images, targets), (expected_images, expected_targets) in zip(batches, expected_batches, strict=True):
        assert images.tobytes() == expected_images.tobytes()
        assert all(targets[name].tobytes() == expected_targets[name].tobytes() for name in expected_targets)
    exported = fresh.export(tmp_path / "npy")
    for name, array in local_noise.arrays.items():
        assert np.load(exported / f"{name}.npy").tobytes() == array.tobytes()
    fresh.materialize()
    assert fresh.take(rows)["images"].tobytes() == expected["images"].tobytes()


def test_a_missing_or_short_part_names_itself_and_its_shards_and_the_others_still_read(s3_server, s3_noise, tmp_path):
    remote = _copy_down(s3_server.fs(), s3_noise[1].url, tmp_path / "down")
    (remote.path / "part-000003.pklz").unlink()
    short = remote.path / "part-000005.pklz"
    short.write_bytes(short.read_bytes()[:-10])
    dataset = remote.reopened(cache_shards=0)
    with pytest.raises(MissingEntryFileError, match=r"part-000003\.pklz \(missing\) .* held shard 3 of 7 "
                                                    r"\(examples 24 to 31\): they are lost"):
        dataset[30]
    with pytest.raises(DamagedShardsError, match=r"part-000005\.pklz \(\d+ bytes where the manifest records \d+\) .* "
                                                 r"held shard 5 of 7 \(examples 40 to 47\)"):
        dataset.take([41])
    assert dataset.take([0, 23, 32, 49])["shard"].tolist() == [0, 2, 4, 6]


def test_a_multi_part_index_round_trips_and_one_not_naming_its_parts_in_order_is_refused(tmp_path):
    index = ShardIndex.from_parts([10, 20, 30], [4, 4, 2])
    index.write(tmp_path / INDEX_FILE)
    read = ShardIndex.read(tmp_path / INDEX_FILE, "x")
    assert read.table().tolist() == [[0, 0, 0], [10, 20, 30], [0, 4, 8], [4, 8, 10], [0, 1, 2]]
    read.check(10, "x", ["a", "b", "c"])
    with pytest.raises(ValueError, match="does not name its 3 parts in order"):
        replace(read, part=np.array([0, 2, 1])).check(10, "x", ["a", "b", "c"])
    with pytest.raises(ValueError, match="has 5 rows but its manifest lists no parts"):
        read.check(10, "x")
    with pytest.raises(ValueError, match="does not tile the data"):
        replace(read, offset=np.array([0, 5, 0])).check(10, "x", ["a", "b", "c"])


# -- unfinished, resumed, finished ------------------------------------------------------------------
def test_an_unfinished_build_leaves_records_and_parts_but_no_manifest_so_no_entry(s3_server, tmp_path):
    data_url = f"{s3_server.bucket()}/data"
    spec = NoiseSpec(n_examples=50, shard_size=8, seed=5, fail_shard=5)
    with pytest.raises(ShardError, match="(?s)shard 5 of 'test-noise'.*refuses to be made.*run the build again"):
        build_into(spec, DataContext.resolve(data_dir=data_url), progress=False)
    fs, entry_url = s3_server.fs(), _entry_url(data_url, spec)
    assert _names(fs, entry_url) == PARTS[:5]  # no manifest: a reader finds no entry
    kind, key = entry_url.rsplit("/", 2)[-2:]
    assert UrlFiles(Location(entry_url), ShardCache(tmp_path / "local")).open() is None
    assert _names(fs, f"{entry_url}.work") == ["build.json"] + [f"shard-{index:06d}.json" for index in range(5)]
    for index in range(5):
        record = json.loads(fs.cat_file(f"{entry_url}.work/shard-{index:06d}.json"))
        part = fs.cat_file(f"{entry_url}/part-{index:06d}.pklz")
        assert record["sha256"] == hashlib.sha256(part).hexdigest() and record["size"] == len(part)
        assert record["shard"] == index and record["n"] == 8 and set(record["layout"]) == {"images", "labels", "shard"}


@pytest.mark.slow
def test_a_killed_driver_resumes_with_only_the_missing_shards(s3_server, tmp_path):
    """SIGKILLed while it makes shard 4, where it waits (held): the kill cannot race the build, whatever the load."""
    data_url = f"{s3_server.bucket()}/data"
    spec = NoiseSpec(n_examples=48, shard_size=4, seed=3)
    first_made, rerun_made = tmp_path / "first", tmp_path / "rerun"
    first_made.mkdir(), rerun_made.mkdir()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"spec": {"n_examples": 48, "shard_size": 4, "seed": 3, "touch_dir": str(first_made),
                                            "hold_shard": 4}, "session": "local", "data_dir": data_url}))
    child = subprocess.Popen([sys.executable, "-m", "support.remote_build_child", str(request)],
                             env={**os.environ, "PYTHONPATH": CHILD_PATH}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_until(lambda: holder_of(first_made, 4), "the driver to hold shard 4", process=child)
    os.kill(child.pid, signal.SIGKILL)
    _, errors = child.communicate(timeout=TIMEOUT)
    assert child.returncode == -signal.SIGKILL, errors
    fs, entry_url = s3_server.fs(), _entry_url(data_url, spec)
    assert _names(fs, entry_url) == [f"part-{index:06d}.pklz" for index in range(4)]  # and no manifest
    assert _names(fs, f"{entry_url}.work") == ["build.json"] + [f"shard-{index:06d}.json" for index in range(4)]

    entry = build_into(replace(spec, touch_dir=str(rerun_made)), DataContext.resolve(data_dir=data_url),
                       progress=False)
    assert made_shards(rerun_made) == list(range(4, 12))
    assert _names(fs, f"{entry_url}.work") == []
    local = build(spec, data_dir=tmp_path / "local", progress=False)
    _assert_parts_are_the_local_shards(fs, entry.url, local)
    _assert_same_rows(_copy_down(fs, entry.url, tmp_path / "down"), local)


def test_a_second_build_of_the_same_spec_is_a_cache_hit(s3_server, s3_noise, tmp_path):
    data_url, entry, _ = s3_noise
    fs = s3_server.fs()
    before = {name: fs.info(f"{entry.url}/{name}")["LastModified"] for name in _names(fs, entry.url)}
    again = build_into(replace(SPEC, touch_dir=str(tmp_path)), DataContext.resolve(data_dir=data_url), "processes:2",
                       progress=False)
    assert again == entry and made_shards(tmp_path) == []
    assert {name: fs.info(f"{entry.url}/{name}")["LastModified"] for name in _names(fs, entry.url)} == before
    assert _names(fs, f"{entry.url}.work") == []  # nothing written, not even the driver's note


# -- sessions ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_font_scenes_built_on_processes_2_into_s3_are_the_local_build(s3_server, tmp_path):
    spec = ScatteredGlyphs(60, glyphs="font", characters="AB7", shard_size=10, seed=4, background_colours=["navy"])
    data_url = f"{s3_server.bucket()}/data"
    entry = build_into(spec, DataContext.resolve(data_dir=data_url), "processes:2", progress=False)
    local = build(spec, data_dir=tmp_path / "local", progress=False)
    fs = s3_server.fs()
    _assert_parts_are_the_local_shards(fs, entry.url, local)
    _assert_same_rows(_copy_down(fs, entry.url, tmp_path / "down"), local)


@pytest.mark.slow
@pytest.mark.dask
def test_a_dask_build_on_loopback_writes_from_the_workers_into_s3(s3_server, local_noise, tmp_path):
    data_url = f"{s3_server.bucket()}/data"
    assert os.environ["AWS_ENDPOINT_URL"] == s3_server.endpoint  # the workers inherit it
    with dask_cluster(tmp_path / "dask", n_workers=2) as cluster:
        wait_for_workers(cluster.address, 2)
        entry = build_into(replace(SPEC, touch_dir=str(tmp_path)), DataContext.resolve(data_dir=data_url),
                           cluster.address.replace("tcp://", "dask://"), progress=False)
    assert made_shards(tmp_path) == list(range(7))
    assert {int(path.name.split("-")[2]) for path in tmp_path.glob("made-*")} - {os.getpid()}  # made elsewhere
    _assert_parts_are_the_local_shards(s3_server.fs(), entry.url, local_noise)


@pytest.mark.slow
def test_workers_fetch_what_the_prepare_made_from_the_bucket_into_their_own_cache(
        s3_server, shared_data, tmp_path, monkeypatch):
    """The driver's prepare makes the backgrounds entry; workers with another local cache read it from the bucket."""
    monkeypatch.setenv("GLYPHFORGE_MIRROR", str(shared_data))
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    spec = ScatteredGlyphs(30, glyphs="font", characters="AB", shard_size=10, backgrounds=["blue_circle"])
    driver_cache, worker_cache = tmp_path / "driver-cache", tmp_path / "worker-cache"
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(worker_cache))
    with open_session("processes", n_workers=1) as session:  # its worker's environment: the worker cache
        monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(driver_cache))
        data_url = f"{s3_server.bucket()}/data"
        entry = build_into(spec, DataContext.resolve(data_dir=data_url), session, progress=False)
    [prepared] = CacheStore.for_data_dir(driver_cache / "data").ls()
    assert prepared.kind == "backgrounds"
    fs = s3_server.fs()
    published = f"{data_url}/cache/backgrounds/{prepared.key}"
    assert _names(fs, published) == sorted([*prepared.files, "manifest.json"])
    [fetched] = CacheStore.for_data_dir(worker_cache / "data").ls()
    assert fetched.key == prepared.key and fetched.manifest["files"] == prepared.manifest["files"]
    local = build(spec, data_dir=tmp_path / "local", progress=False)
    _assert_parts_are_the_local_shards(fs, entry.url, local)


def test_the_entries_a_prepare_returns_and_only_those_are_published_for_workers_with_their_own_cache(
        s3_server, tmp_path, monkeypatch):
    """`TableSpec.prepare` makes and reads a notes entry and a table, and returns the table: what its shards read."""
    spec = TableSpec(n_examples=20, shard_size=10, seed=3)
    driver_cache, worker_cache = tmp_path / "driver-cache", tmp_path / "worker-cache"
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(worker_cache))
    with open_session("processes", n_workers=1) as session:  # its worker's environment: the worker cache
        monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(driver_cache))
        data_url = f"{s3_server.bucket()}/data"
        entry = build_into(spec, DataContext.resolve(data_dir=data_url), session, progress=False)
    made = {prepared.kind: prepared for prepared in CacheStore.for_data_dir(driver_cache / "data").ls()}
    assert sorted(made) == [NOTES_KIND, TABLE_KIND]
    table, fs = made[TABLE_KIND], s3_server.fs()
    assert _names(fs, f"{data_url}/cache") == sorted(  # no notes: no shard reads them
        [f"{TABLE_KIND}/{table.key}/{name}" for name in [*table.files, "manifest.json"]]
        + [f"{spec.kind}/{entry.name}/{name}" for name in [BLOCKS_FILE, INDEX_FILE, "manifest.json",
                                                           "part-000000.pklz", "part-000001.pklz"]])
    [fetched] = CacheStore.for_data_dir(worker_cache / "data").ls()
    assert (fetched.kind, fetched.key) == (TABLE_KIND, table.key)
    rows = _copy_down(fs, entry.url, tmp_path / "down")
    assert rows.arrays["table"].tolist() == [row * 7 + 3 for row in range(20)]


def test_the_prepared_entries_are_published_checked_when_fetched_and_never_replace_a_foreign_object(
        s3_server, shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_MIRROR", str(shared_data))
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    spec = ScatteredGlyphs(20, glyphs="font", characters="AB", shard_size=10, backgrounds=["blue_circle"])
    data_url = f"{s3_server.bucket()}/data"
    build_into(spec, DataContext.resolve(data_dir=data_url), progress=False)
    [prepared] = DataContext.resolve(data_dir=data_url).store.ls()
    fs, inputs = s3_server.fs(), ((prepared.kind, prepared.params),)
    published = f"{data_url}/cache/{prepared.kind}/{prepared.key}"
    assert fs.cat_file(f"{published}/manifest.json") == (prepared.path / "manifest.json").read_bytes()

    fetch_entries(inputs, DataContext.resolve(data_dir=data_url, cache_dir=tmp_path / "worker-1"))
    [fetched] = CacheStore.for_data_dir(tmp_path / "worker-1" / "data").ls()
    assert fetched.manifest["entry_sha256"] == prepared.manifest["entry_sha256"]
    assert all((fetched.path / name).read_bytes() == (prepared.path / name).read_bytes() for name in prepared.files)

    [name] = prepared.files
    original = fs.cat_file(f"{published}/{name}")
    fs.pipe_file(f"{published}/{name}", bytes(len(original)))  # damaged in the bucket, at the same size
    damaged_store = CacheStore.for_data_dir(tmp_path / "worker-2" / "data")
    with pytest.raises(DamagedRemoteEntryError, match=rf"{published}/{name} is [\d,]+ bytes with sha256 .* is damaged"):
        fetch_entries(inputs, DataContext.resolve(data_dir=data_url, cache_dir=tmp_path / "worker-2"))
    assert damaged_store.ls() == []  # nothing half-fetched

    foreign_url = f"{s3_server.bucket()}/data"
    foreign = f"{foreign_url}/cache/{prepared.kind}/{prepared.key}/{name}"
    fs.pipe_file(foreign, b"not glyphforge's")
    with pytest.raises(PublishConflictError, match=rf"{foreign} is 16 bytes, the entry's is [\d,]+: .* as it is"):
        build_into(replace(spec, seed=1), DataContext.resolve(data_dir=foreign_url), progress=False)
    assert fs.cat_file(foreign) == b"not glyphforge's"
    assert _names(fs, f"{foreign_url}/cache/scenes") == [f"{cache_key('scenes', cache_params(replace(spec, seed=1)))}"
                                                        ".work/build.json"]  # no shard was made

    same_size_url = f"{s3_server.bucket()}/data"  # a foreign object of the input's size: its bytes decide (issue 30)
    same_size = f"{same_size_url}/cache/{prepared.kind}/{prepared.key}/{name}"
    fs.pipe_file(same_size, bytes(len(original)))
    with pytest.raises(PublishConflictError, match=rf"{same_size} is of the right size but holds other bytes"):
        build_into(replace(spec, seed=2), DataContext.resolve(data_dir=same_size_url), progress=False)
    assert _names(fs, f"{same_size_url}/cache/{prepared.kind}") == [f"{prepared.key}/{name}"]  # no manifest beside it


def test_a_shard_task_travels_to_workers_without_the_secret_storage_options():
    data_dir = Location("s3://bucket/data", {"secret": "s3cr3t-value", "key": "AKIA-KEY-ID", "endpoint_url": "http://x"})
    task = RemoteShardTask(SPEC, data_dir.child("cache", "test-noise", "k"), data_dir)
    sent = dill.dumps(task)
    assert b"s3cr3t-value" not in sent and b"AKIA-KEY-ID" not in sent
    received = dill.loads(sent)
    assert received.data_dir.storage_options == {"endpoint_url": "http://x"} and received.entry == task.entry


# -- other URLs, bad URLs ------------------------------------------------------------------------------
def test_a_file_url_data_dir_is_its_path_so_a_build_there_is_the_local_one(tmp_path, local_noise, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = DataContext.resolve(data_dir="file://store")  # relative: made absolute here, once
    assert context.remote is None and context.data_dir == tmp_path / "store"
    built = build(replace(SPEC, touch_dir=str(tmp_path)), context=context, progress=False)
    assert built.path == tmp_path / "store" / "cache" / "test-noise" / local_noise.key
    assert sorted(path.name for path in built.path.iterdir()) == sorted(
        path.name for path in local_noise.path.iterdir())
    _assert_same_rows(built, local_noise)
    with pytest.raises(ValueError, match=r"is a path \(a file:// URL is the path it names\): use build"):
        build_into(SPEC, context, progress=False)


def test_a_missing_bucket_an_unknown_scheme_or_an_http_url_fail_clearly_before_any_shard(s3_server, tmp_path):
    spec = replace(SPEC, touch_dir=str(tmp_path))
    entry = f"s3://gf-no-such-bucket/x/cache/test-noise/{cache_key(spec.kind, cache_params(spec))}"
    with pytest.raises(RemoteStorageError, match=store_failure("build into", entry, NO_BUCKET, "reading manifest")):
        build_into(spec, DataContext.resolve(data_dir="s3://gf-no-such-bucket/x"), progress=False)
    with pytest.raises(UnsupportedURLError, match="nosuch://bucket/x: glyphforge does not support nosuch:// URLs"):
        build_into(spec, DataContext.resolve(data_dir="nosuch://bucket/x"), progress=False)
    with pytest.raises(ReadOnlyStoreError, match="cannot build into https://example.invalid/x: glyphforge only "
                                                 "reads https:// URLs"):
        build_into(spec, DataContext.resolve(data_dir="https://example.invalid/x"), progress=False)
    assert made_shards(tmp_path) == []


def test_a_refused_write_is_named_as_publishing_names_it_without_the_secret_before_any_shard(s3_server, tmp_path):
    spec = replace(SPEC, touch_dir=str(tmp_path))
    bucket = s3_server.bucket()
    options = s3_server.user_denied_puts(bucket, "*.work/*")  # the build's first write: its note
    key = cache_key(spec.kind, cache_params(spec))
    entry = f"{bucket}/x/cache/test-noise/{key}"
    refused = store_failure("build into", entry, REFUSED, f"writing {key}.work/build.json")
    with s3_server.checking_credentials(), pytest.raises(StorageError, match=refused) as raised:
        build_into(spec, DataContext.resolve(data_dir=f"{bucket}/x", storage_options=options), progress=False)

    assert isinstance(raised.value, RemoteStorageError) and options["secret"] not in str(raised.value)
    assert made_shards(tmp_path) == [] and s3_server.fs().find(bucket[5:]) == []


def test_the_cli_builds_scenes_into_a_bucket_and_refuses_an_http_data_dir(s3_server):
    data_url = f"{s3_server.bucket()}/data"
    done = run_here("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "20", "--shard-size", "10",
                    "--data-dir", data_url, "-q")
    assert done.returncode == 0, done.stderr
    spec = ScatteredGlyphs(20, glyphs="font", shard_size=10)
    entry_url = _entry_url(data_url, spec)
    assert done.stdout == f"built 20 scenes: entry {entry_url.rsplit('/', 1)[-1]} at {entry_url}\n"
    assert _names(s3_server.fs(), entry_url) == sorted(["blocks.npy", "index.npy", "manifest.json", *PARTS[:2]])
    refused = run("glyphforge", "build", "scenes", "--glyphs", "font", "--data-dir", "https://example.invalid/x")
    assert refused.returncode == 2 and "glyphforge only reads https:// URLs" in refused.stderr


def test_build_with_a_url_data_dir_returns_the_remote_reader(s3_server, local_noise):
    dataset = build(SPEC, data_dir=f"{s3_server.bucket()}/data", progress=False)
    assert dataset.entry.meta["parts"][:2] == PARTS[:2]  # a multi-part entry, read where it lies
    _assert_same_rows(dataset, local_noise)
    rows = [11, 0, len(local_noise) - 1, 8]
    assert all(np.array_equal(dataset.take(rows)[name], local_noise.take(rows)[name]) for name in local_noise.layout)
    remote_batches = [images.tobytes() for images, _ in dataset.stream(7, seed=3)]
    assert remote_batches == [images.tobytes() for images, _ in local_noise.stream(7, seed=3)]


def test_a_dataset_built_into_s3_keeps_its_shards_in_the_contexts_local_cache_dir(s3_server, tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "environment's"))
    context = DataContext.resolve(data_dir=f"{s3_server.bucket()}/data", cache_dir=tmp_path / "mine")
    ds = build(NoiseSpec(n_examples=20, shard_size=10), context=context, progress=False)
    ds[15]
    assert [path.name for path in (tmp_path / "mine" / "shards").rglob("*.shard")]
    assert not (tmp_path / "environment's" / "shards").exists()
