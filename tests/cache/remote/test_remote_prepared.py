"""Prepared datasets in a data dir at a URL (issue #25, fifth bullet): loaders read them through the local cache.

Entries are prepared into a local data dir, uploaded as a publisher does (data files, then
``manifest.json``) to a real S3 server on 127.0.0.1 (moto) or served by the project's HTTP
server, then loaded with ``data_dir=URL`` and a fresh local cache (conftest gives each test
its own ``$GLYPHFORGE_CACHE_DIR``). The ``glyphforge cache``/``info`` commands run as real
subprocesses against the same server.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

import glyphforge as gf
from glyphforge import DataContext
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import CacheStore
from glyphforge.cache.entry import Entry
from glyphforge.cache.remote.files import DamagedRemoteEntryError, entry_location
from glyphforge.cache.remote.pull_through import PullThrough
from glyphforge.datasets import emnist
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.emnist import EMNIST, EMNIST_ZIP, load_emnist, prepare_emnist
from glyphforge.datasets.mnist import DATASET as MNIST_DATASET
from glyphforge.datasets.mnist import MNIST, load_mnist, prepare_mnist
from glyphforge.datasets.omniglot.dataset import load_omniglot, prepare_omniglot
from glyphforge.storage import Location
from glyphforge.storage.reads import RemoteAccessError
from glyphforge.textfmt import human_size

from support.cli import run_here
from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist
from support.toy_dataset import load_toy, prepared_toy


def publish_by_hand(entry: Entry, data_dir: str) -> Location:
    """Upload ``entry`` into the data dir at ``data_dir`` as a publisher does: its data files, then its manifest."""
    location = entry_location(Location(data_dir), entry.kind, entry.key)
    fs = location.fs
    fs.makedirs(location.path, exist_ok=True)  # a no-op on S3; file:// needs its folders
    for name in [*entry.files, "manifest.json"]:
        fs.put_file(str(entry.path / name), location.child(name).path)
    return location


def local_store(data_dir: str) -> CacheStore:
    """This machine's copy of the data dir at ``data_dir`` (under the test's local cache)."""
    return DataContext.resolve(data_dir=data_dir).store


def files_under(root) -> list[str]:
    """Every file below ``root`` (relative), but the lock and readers files the store keeps beside entries."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*")
                  if path.is_file() and not path.name.endswith((".lock", ".readers", ".holder")))


@pytest.fixture(scope="module")
def emnist_dir(synthetic_emnist, tmp_path_factory):
    """A local data dir holding EMNIST byclass 28x28 (from the synthetic archive, pinned for the module as
    upstream's: a reader at the URL looks for upstream's key, never an own copy's)."""
    data_dir = tmp_path_factory.mktemp("emnist-local")
    resource = dataclasses.replace(EMNIST_ZIP, hash=f"md5:{synthetic_emnist.md5}", size=synthetic_emnist.size)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(DECLARATIONS, "emnist", dataclasses.replace(emnist.DATASET, resources={"gzip.zip": resource}))
        prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, progress=False, data_dir=data_dir)
        yield data_dir


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """A local data dir holding MNIST 28x28 (synthetic files, pinned for the module as upstream's, as above)."""
    files = write_synthetic_mnist(tmp_path_factory.mktemp("mnist-files"), (60, 20), seed=4)
    data_dir = tmp_path_factory.mktemp("mnist-local")
    mnist = MNIST_DATASET
    resources = {name: dataclasses.replace(resource, hash=f"md5:{files.md5[name]}", size=files.size[name])
                 for name, resource in mnist.resources.items()}
    configs = {"default": dataclasses.replace(mnist.configs["default"], n_images=(60, 20))}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(DECLARATIONS, "mnist", dataclasses.replace(mnist, resources=resources, configs=configs))
        prepare_mnist(archives={name: files.path(name) for name in ALL_FILES}, progress=False, data_dir=data_dir)
        yield data_dir


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    """A local data dir holding the toy dataset (level 3), registered for the module."""
    with prepared_toy(tmp_path_factory.mktemp("toy-local")) as data_dir:
        yield data_dir


def only_entry(data_dir, kind: str) -> Entry:
    [entry] = [entry for entry in CacheStore.for_data_dir(data_dir).ls() if entry.kind == kind]
    return entry


# -- loading from s3:// ------------------------------------------------------------------------------------
def test_emnist_loads_from_s3_exactly_as_from_its_local_data_dir(s3_server, emnist_dir):
    url = s3_server.bucket() + "/data"
    local = only_entry(emnist_dir, "emnist")
    remote = publish_by_hand(local, url)
    expected = load_emnist("Ab7", subset="all", seed=3, data_dir=emnist_dir)
    got = load_emnist("Ab7", subset="all", seed=3, data_dir=url, download=False)
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else list(a) == list(b)
    copy = local_store(url).get("emnist", local.params)
    assert copy is not None and isinstance(local_store(url).source, PullThrough)
    assert copy.manifest == local.manifest  # the same manifest: key, files table, created, entry_sha256
    assert files_under(copy.path) == files_under(local.path)
    # the second load is local: with the entry gone from the URL it still loads, and the copy is untouched
    mtimes = {path.name: path.stat().st_mtime_ns for path in copy.path.iterdir()}
    remote.fs.rm(remote.path, recursive=True)
    again = EMNIST(classes="Ab7", subset="all", data_dir=url, download=False)
    assert len(again) == len(expected[0])
    assert {path.name: path.stat().st_mtime_ns for path in copy.path.iterdir()} == mtimes


def test_mnist_and_its_map_style_class_load_from_s3(s3_server, mnist_dir):
    url = s3_server.bucket() + "/data"
    publish_by_hand(only_entry(mnist_dir, "mnist"), url)
    x, y, classes = load_mnist(["3", "7"], subset="test", seed=1, data_dir=url, download=False)
    x0, y0, classes0 = load_mnist(["3", "7"], subset="test", seed=1, data_dir=mnist_dir)
    assert np.array_equal(x, x0) and np.array_equal(y, y0) and list(classes) == list(classes0)
    dataset = MNIST(classes=["3", "7"], subset="test", data_dir=url, download=False)
    assert np.array_equal(np.stack([dataset[i][0] for i in range(len(dataset))]),
                          np.stack([MNIST(classes=["3", "7"], subset="test", data_dir=mnist_dir)[i][0]
                                    for i in range(len(dataset))]))


def test_a_registered_dataset_loads_from_s3_through_gf_load(s3_server, toy_dir):
    url = s3_server.bucket() + "/data"
    publish_by_hand(only_entry(toy_dir, "toy"), url)
    x, y, names = gf.load("toy", data_dir=url, download=False)
    assert np.array_equal(x, load_toy(data_dir=toy_dir)[0]) and names == [f"square {i}" for i in range(5)]


@pytest.mark.slow
def test_omniglot_loads_from_s3(s3_server, shared_data, tmp_path):
    local_dir = tmp_path / "local"
    [entry] = prepare_omniglot(sets="small1", data_dir=local_dir, mirrors=[shared_data.as_uri()], progress=False)
    url = s3_server.bucket() + "/data"
    publish_by_hand(entry, url)
    got = load_omniglot(["Latin,3", "Korean,1"], sets="small1", seed=7, data_dir=url, download=False)
    expected = load_omniglot(["Latin,3", "Korean,1"], sets="small1", seed=7, data_dir=local_dir)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert local_store(url).get(entry.kind, entry.params).manifest == entry.manifest


# -- over HTTP: a read-only data dir; the second load makes no request ----------------------------------------
def test_an_https_style_data_dir_is_read_once_then_locally(toy_dir):
    entry = only_entry(toy_dir, "toy")
    with LocalHTTPServer() as server:
        url = serve(server, entry)
        x, _, _ = load_toy(data_dir=url, download=False)
        assert np.array_equal(x, load_toy(data_dir=toy_dir)[0])
        first = server.requests()
        assert first >= 2 and server.bytes_served(f"data/cache/toy/{entry.key}/squares.pklz") == entry.size_bytes
        x, _, _ = load_toy(data_dir=url, download=False)  # a new context and store: the local copy answers
        assert server.requests() == first


def serve(server: LocalHTTPServer, entry: Entry) -> str:
    """Serve ``entry`` from ``server`` as a data dir at ``<server>/data`` would hold it; return the data dir's URL."""
    for name in [*entry.files, "manifest.json"]:
        server.add(f"data/cache/{entry.kind}/{entry.key}/{name}", (entry.path / name).read_bytes())
    return server.url("data")


@pytest.mark.slow
def test_503s_and_a_dropped_connection_at_the_url_are_retried(toy_dir, caplog):
    entry = only_entry(toy_dir, "toy")
    with LocalHTTPServer() as server:
        url = serve(server, entry)
        where = f"data/cache/toy/{entry.key}"
        server.fail(f"{where}/manifest.json", 503, times=1)
        server.drop_after(f"{where}/squares.pklz", 10, times=1)
        with caplog.at_level(logging.INFO, logger="glyphforge"):
            x, _, _ = load_toy(data_dir=url, download=False)
    assert np.array_equal(x, load_toy(data_dir=toy_dir)[0])
    retries = [record.getMessage() for record in caplog.records if "trying again" in record.getMessage()]
    assert len(retries) == 2
    assert retries[0].startswith(f"could not read {url}/cache/toy/{entry.key}/manifest.json (the manifest of an "
                                 "entry) (the server answered 503 Service Unavailable)")
    assert retries[1].startswith("could not read bytes 0 to ")
    assert f"of {url}/cache/toy/{entry.key}/squares.pklz" in retries[1]
    assert all("(attempt 2 of 5)" in retry for retry in retries)
    assert local_store(url).get("toy", entry.params).manifest == entry.manifest


def test_a_refusal_at_the_url_is_a_clear_error_tried_once(toy_dir):
    entry = only_entry(toy_dir, "toy")
    with LocalHTTPServer() as server:
        url = serve(server, entry)
        manifest = f"data/cache/toy/{entry.key}/manifest.json"
        server.fail(manifest, 403, times=None)
        with pytest.raises(RemoteAccessError, match=rf"^could not read {server.url(manifest)} \(the manifest of an "
                                                    r"entry\): access was refused \(HTTP 403.* The credentials this "
                                                    r"process has are wrong or missing"):
            load_toy(data_dir=url, download=False)
        assert server.requests() == 1
    assert files_under(local_store(url).root) == []


# -- an entry that is not at the URL -------------------------------------------------------------------------
def test_an_entry_missing_at_the_url_is_an_error_naming_it_without_download(s3_server, synthetic_emnist):
    url = s3_server.bucket() + "/data"
    with pytest.raises(FileNotFoundError, match=rf"^EMNIST byclass is not prepared in {url} \(nor in this machine's "
                                                rf"copy of it, .*; to share it there, publish it \(`prepare-data "
                                                rf"--data-dir {url}`, or `glyphforge publish`\)\): run "
                                                r"prepare_emnist\(split='byclass'\) or "
                                                r"`prepare-data emnist --split byclass`, or pass download=True$"):
        load_emnist("Ab", data_dir=url, download=False)
    assert local_store(url).ls() == []


def test_an_entry_missing_at_the_url_is_made_locally_and_never_written_there(s3_server, toy_dir, caplog):
    url = s3_server.bucket() + "/data"
    with caplog.at_level(logging.INFO, logger="glyphforge"):
        x, _, _ = load_toy(data_dir=url)  # download allowed: the toy prepares itself on this machine
    assert np.array_equal(x, load_toy(data_dir=toy_dir)[0])
    key = only_entry(toy_dir, "toy").key
    [line] = [record.getMessage() for record in caplog.records if "is not at" in record.getMessage()]
    assert line.startswith(f"toy {key[:12]} is not at {url}: where loading may prepare it, it is made on this "
                           "machine, in ")
    assert f"`prepare-data toy --data-dir {url}`, or `glyphforge publish`" in line
    assert [entry.key for entry in local_store(url).ls()] == [key]
    assert s3_server.fs().find(url) == []  # nothing written at the URL


# -- damaged or built entries at the URL --------------------------------------------------------------------
def test_a_damaged_entry_at_the_url_is_an_error_and_leaves_nothing_here(s3_server, toy_dir):
    url = s3_server.bucket() + "/data"
    remote = publish_by_hand(only_entry(toy_dir, "toy"), url)
    remote.fs.pipe_file(remote.child("squares.pklz").path, b"not the squares")
    with pytest.raises(DamagedRemoteEntryError, match=rf"squares.pklz is shorter than the [\d,]+ bytes its manifest "
                                                      rf"records: .* The entry at {remote} is damaged"):
        load_toy(data_dir=url, download=False)
    store = local_store(url)
    assert store.ls() == [] and files_under(store.root) == []


def test_a_built_dataset_at_the_url_is_not_fetched_whole(s3_server, tmp_path):
    url = s3_server.bucket() + "/data"

    def fill(writer) -> None:
        size = writer.write("arrays.pklz", np.zeros(4)).stat().st_size
        ShardIndex.from_lengths([size], [4]).write(tmp_path / INDEX_FILE)
        writer.add_file(INDEX_FILE, tmp_path / INDEX_FILE)
        np.save(tmp_path / BLOCKS_FILE, np.array([1, size], np.int64))
        writer.add_file(BLOCKS_FILE, tmp_path / BLOCKS_FILE)
        writer.meta.update(layout={"x": {"dtype": "<f8", "shape": []}}, n_examples=4, images="x")

    built = CacheStore(tmp_path / "cache").get_or_create("scenes", {"n": 1}, fill)
    publish_by_hand(built, url)
    store = local_store(url)
    assert store.get("scenes", {"n": 1}) is None
    assert files_under(store.root) == []


def test_a_copied_manifest_is_committed_only_over_its_own_files(tmp_path, toy_dir):
    entry = only_entry(toy_dir, "toy")
    store = CacheStore(tmp_path / "cache")
    with pytest.raises(ValueError, match=r"the manifest given for toy .* is not that of the staged files .* the "
                                         r"staging holds \['other.pklz'\]\): nothing was committed"):
        with store.create("toy", entry.params) as writer:
            (writer.path / "other.pklz").write_bytes(b"x")
            writer.manifest = entry.manifest
    assert store.ls() == [] and files_under(store.root) == []


# -- the commands with a URL data dir -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published(s3_server, toy_dir, mnist_dir):
    """A bucket holding the toy and MNIST entries, and an upload in progress (data without its manifest)."""
    url = s3_server.bucket() + "/data"
    entries = [only_entry(toy_dir, "toy"), only_entry(mnist_dir, "mnist")]
    for entry in entries:
        publish_by_hand(entry, url)
    fs = s3_server.fs()
    fs.pipe_file(f"{url}/cache/toy/{'0' * 64}/squares.pklz", b"half an upload")
    return url, entries


def test_cache_ls_lists_the_entries_at_a_url(published):
    url, entries = published
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", url)
    assert listed.returncode == 0, listed.stderr
    header, rule, *rows = listed.stdout.splitlines()
    assert header.split() == ["key", "kind", "params", "files", "size", "created"]
    assert sorted(row.split()[:2] for row in rows) == sorted([entry.key[:12], entry.kind] for entry in entries)
    assert listed.stderr == (f"not listed: {url}/cache/toy/{'0' * 64}: data files without manifest.json: an upload "
                             "in progress, or an interrupted one (not an entry yet; publishing it again finishes "
                             "it)\n")


def test_info_describes_a_url_data_dir(published):
    url, entries = published
    info = run_here("glyphforge", "info", "--data-dir", url)
    assert info.returncode == 0, info.stderr
    size = sum(entry.size_bytes for entry in entries)
    lines = info.stdout.splitlines()
    assert lines[0] == f"data dir:   {url}"
    assert lines[1] == f"cache:      {url}/cache (2 entries, {human_size(size)})"
    assert lines[2].startswith("local copy: ") and lines[2].endswith("/data (entries fetched from the URL, and what "
                                                                     "is made on this machine)")
    assert any(line.split()[:2] == ["mnist", "shape=[28,28]"] for line in lines)


def test_cache_verify_rehashes_the_entries_at_a_url(s3_server, published, toy_dir):
    url, entries = published
    good = run_here("glyphforge", "cache", "verify", "--data-dir", url)
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines() == [f"INCOMPLETE {url}/cache/toy/{'0' * 64}: data files without manifest.json: "
                                        "an upload in progress, or an interrupted one (not an entry yet; publishing "
                                        "it again finishes it)", f"all 2 entries at {url} verified"]
    damaged = s3_server.bucket() + "/data"
    entry = only_entry(toy_dir, "toy")
    remote = publish_by_hand(entry, damaged)
    data = bytearray((entry.path / "squares.pklz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size, another sha256
    remote.fs.pipe_file(remote.child("squares.pklz").path, bytes(data))
    mnist = publish_by_hand(entries[1], damaged)
    mnist.fs.rm_file(mnist.child("class_03.pklz").path)
    bad = run_here("glyphforge", "cache", "verify", "--data-dir", damaged)
    assert bad.returncode == 1
    assert sorted(bad.stdout.splitlines()) == [
        f"CORRUPT {mnist}/class_03.pklz: missing (deleted, or never uploaded)",
        f"CORRUPT {remote}/squares.pklz: sha256 differs from the manifest (corrupted, or replaced)"]
    assert f"2 problem(s) found at {damaged}; glyphforge does not delete at a URL" in bad.stderr
    assert "delete each damaged entry's objects with the store's own tools first" in bad.stderr


def test_an_http_data_dir_cannot_be_listed(toy_dir):
    with LocalHTTPServer() as server:
        done = run_here("glyphforge", "cache", "ls", "--data-dir", server.url("data"))
        assert done.returncode == 2
        assert done.stderr.startswith(f"error: {server.url('data')} cannot be listed: HTTP has no listing")
        assert server.requests() == 0


@pytest.mark.parametrize("command", [["gc"], ["rm", "abcdef12"]])
def test_cache_gc_and_rm_refuse_a_url(published, command):
    url, _ = published
    done = run_here("glyphforge", "cache", *command, "--data-dir", url)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: glyphforge cache {command[0]} never deletes anything at a URL ({url}) in "
                                  "this version. Remove an entry there with the store's own tools, its manifest.json "
                                  "first")
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", url)
    assert len(listed.stdout.splitlines()) == 4  # header, rule, both entries: nothing was deleted


@pytest.mark.slow
def test_an_unreachable_store_is_one_clear_error(unreachable_listings):
    pytest.importorskip("s3fs", reason="s3fs is in the test extra")
    done, _ = unreachable_listings["s3"].result(timeout=300)  # started with the session
    assert done.returncode == 1 and done.stdout == ""
    retries, error = done.stderr.split("error: ")
    assert retries.count("trying again") == 4  # each retry said (INFO), then one error
    assert error.startswith("could not list s3://gf-nowhere/data/cache: the connection failed "
                            "(EndpointConnectionError), 5 times in a row")
    assert "check the URL and the connection" in done.stderr
    assert "Traceback" not in done.stderr and "sekrit-4711" not in done.stderr
