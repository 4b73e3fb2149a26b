"""``gs://`` data dirs end to end (issue #25), against a real GCS JSON API on 127.0.0.1.

gcp-storage-emulator serves the API in this process (`support.gcs_server`); gcsfs reaches it
through the environment the fixture sets, as the CLI subprocesses do. The paths are those
the S3 tests take, kept lean: one small build (50 rows in 7 shards) made once, published,
built into a bucket, read back, listed, and the errors of what is not there.
"""
from __future__ import annotations

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import build
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.lookup import find_built
from glyphforge.builds.reading.remote_shards import RemoteShards
from glyphforge.cache import CacheStore
from glyphforge.errors import StorageError
from glyphforge.storage import Location
from glyphforge.storage.reads import RemoteAccessError, RemoteFileMissingError, RemoteReadError, read_bytes

from support.cli import run, run_here
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.http_server import LocalHTTPServer
from support.specs import NoiseSpec
from support.store_errors import NO_BUCKET, store_failure
from support.toy_dataset import load_toy, prepared_toy

#: 50 examples in shards of 8: 7 shards, the last one short.
SPEC = NoiseSpec(n_examples=50, shard_size=8, seed=5)


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> BuiltDataset:
    """`SPEC` built the usual way, on local disk (module-wide: only read)."""
    return build(SPEC, data_dir=tmp_path_factory.mktemp("local"), progress=False)


@pytest.fixture(scope="module")
def published(gcs_server, local) -> tuple[str, str]:
    """The local build published to a bucket once: the data dir's URL and the entry's (``publish``'s answer)."""
    data_url = f"{gcs_server.bucket()}/data"
    return data_url, local.publish(data_url, progress=False)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy dataset, registered for the module, prepared in a local data dir: that dir."""
    with prepared_toy(tmp_path_factory.mktemp("toy-local")) as data_dir:
        yield data_dir


def objects(fs, url: str) -> dict[str, bytes]:
    """The objects under the ``gs://`` URL ``url`` (``fs``: a fresh gcsfs), by name below it."""
    root = url.removeprefix("gs://")
    return {path[len(root):].lstrip("/"): fs.cat_file(path) for path in fs.find(root)}


def assert_same_rows(remote: BuiltDataset, local: BuiltDataset) -> None:
    assert (len(remote), remote.key, remote.metadata, remote.layout) == (len(local), local.key, local.metadata,
                                                                         local.layout)
    for name, array in local.reopened().arrays.items():
        assert remote.reopened().arrays[name].tobytes() == array.tobytes(), name


def images(batches) -> list[bytes]:
    return [bytes(image) for batch in batches for image in batch[0]]


# -- publish, then read where it lies ---------------------------------------------------------------
def test_a_published_dataset_lands_byte_for_byte_and_reads_as_the_local_one(gcs_server, local, published):
    data_url, url = published
    assert url == f"{data_url}/cache/{SPEC.kind}/{local.key}"
    expected = {name: (local.path / name).read_bytes() for name in [*local.entry.files, "manifest.json"]}
    assert objects(gcs_server.fs(), url) == expected

    ds = gf.open_built(url)
    assert isinstance(ds.source, RemoteShards) and ds.url == url
    assert_same_rows(ds, local)
    taken, wanted = ds.take([49, 3, 17, 3, -1]), local.take([49, 3, 17, 3, -1])
    assert taken.keys() == wanted.keys() and all(np.array_equal(taken[name], wanted[name]) for name in wanted)
    assert images(ds.stream(16, shuffle=True, seed=3)) == images(local.stream(16, shuffle=True, seed=3))


def test_a_second_epoch_reads_the_local_copies_not_the_bucket(gcs_server, local):
    url = local.publish(f"{gcs_server.bucket()}/data", progress=False)
    ds = gf.open_built(url)
    first = images(ds.stream(16, shuffle=True, seed=4))
    gcs_server.fs().rm(f"{url.removeprefix('gs://')}/arrays.pklz")  # from now on, a read of the data fails
    assert images(ds.stream(16, shuffle=True, seed=4)) == first == images(local.stream(16, shuffle=True, seed=4))


# -- build into a bucket ---------------------------------------------------------------------------
def test_a_build_into_a_gs_data_dir_is_the_local_build(gcs_server, local):
    data_url = f"{gcs_server.bucket()}/data"
    ds = build(SPEC, data_dir=data_url, progress=False)
    entry = f"{data_url}/cache/{SPEC.kind}/{local.key}"
    assert isinstance(ds.source, RemoteShards) and ds.url == entry
    assert_same_rows(ds, local)
    names = sorted(objects(gcs_server.fs(), entry))
    assert names == sorted(["blocks.npy", "index.npy", "manifest.json", *(f"part-{n:06d}.pklz" for n in range(7))])


# -- a prepared entry through data_dir=gs://, and the CLI's listing -----------------------------------------
def test_a_prepared_entry_loads_through_a_gs_data_dir_and_cache_ls_lists_it(gcs_server, toy):
    url = f"{gcs_server.bucket()}/data"
    [entry] = [entry for entry in CacheStore.for_data_dir(toy).ls() if entry.kind == "toy"]
    assert gf.publish("toy", url, data_dir=toy, progress=False) == f"{url}/cache/toy/{entry.key}"
    x, y, names = load_toy(data_dir=url, download=False)
    local_x, local_y, _ = load_toy(data_dir=toy)
    assert np.array_equal(x, local_x) and np.array_equal(y, local_y) and names == [f"square {i}" for i in range(5)]

    listed = run_here("glyphforge", "cache", "ls", "--data-dir", url)
    assert listed.returncode == 0, listed.stderr
    header, rule, *rows = listed.stdout.splitlines()
    assert header.split() == ["key", "kind", "params", "files", "size", "created"]
    assert [row.split()[:2] for row in rows] == [[entry.key[:12], "toy"]]


# -- what is not there ---------------------------------------------------------------------------------
# gcsfs names the resource that was not found, not the reason: a bucket called "...bucket..." must not be
# taken for a missing bucket, and a missing bucket must not be taken for an empty folder.
def test_a_missing_object_in_a_bucket_named_bucket_is_a_missing_object(gcs_server, local):
    url = local.publish(f"{gcs_server.bucket('gf-gcs-bucket-objects')}/data", progress=False)
    ds = gf.open_built(url)
    gcs_server.fs().rm(f"{url.removeprefix('gs://')}/arrays.pklz")
    with pytest.raises(RemoteFileMissingError, match=r"could not read .*arrays.pklz.*: there is no such object") \
            as raised:
        ds[0]
    assert not raised.value.no_bucket
    with pytest.raises(LookupError, match=r"no built dataset at gs://.*: it has no manifest.json"):
        gf.open_built(f"{gcs_server.bucket()}/data/cache/{SPEC.kind}/{local.key}")


def test_an_empty_data_dir_in_a_bucket_named_bucket_holds_no_dataset(gcs_server):
    url = f"{gcs_server.bucket('gf-gcs-bucket-empty')}/data"
    with pytest.raises(LookupError, match=rf"no built dataset '{SPEC.kind}' in {url}/cache"):
        find_built(SPEC.kind, data_dir=url)


def test_cache_ls_of_a_missing_bucket_says_so(gcs_server):
    done = run("glyphforge", "cache", "ls", "--data-dir", "gs://gf-gcs-nowhere/data")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: could not list gs://gf-gcs-nowhere/data/cache: the bucket does not exist")
    with pytest.raises(RemoteFileMissingError, match="the bucket does not exist") as raised:
        find_built(SPEC.kind, data_dir="gs://gf-gcs-nowhere/data")
    assert raised.value.no_bucket


def test_opening_or_building_an_entry_in_a_missing_bucket_says_the_bucket_does_not_exist(gcs_server, local):
    # gcsfs's 404 on the manifest does not tell a missing bucket from a missing entry: one listing more does
    url = f"gs://gf-gcs-nowhere/data/cache/{SPEC.kind}/{local.key}"
    with pytest.raises(RemoteFileMissingError, match=rf"could not read {url}/manifest.json .*: the bucket does not "
                                                     "exist. It was deleted, or the URL is wrong") as raised:
        gf.open_built(url)
    assert raised.value.no_bucket
    with pytest.raises(StorageError, match=store_failure("build into", url, NO_BUCKET, "reading manifest.json")):
        build(SPEC, data_dir="gs://gf-gcs-nowhere/data", progress=False)
    assert not gcs_server.fs().exists("gf-gcs-nowhere")


def test_publishing_to_a_missing_bucket_names_it_and_creates_nothing(gcs_server, local):
    place = f"gs://gf-gcs-nowhere/data/cache/{SPEC.kind}/{local.key}"
    with pytest.raises(StorageError, match=store_failure("publish to", place, NO_BUCKET, "uploading ")):
        local.publish("gs://gf-gcs-nowhere/data", progress=False)
    assert not gcs_server.fs().exists("gf-gcs-nowhere")


def test_refusals_and_bad_answers_of_a_gcs_endpoint_are_the_named_errors_at_once(gcs_server):
    # the project's HTTP server as the GCS endpoint: the emulator checks no credentials
    path = "download/storage/v1/b/gf-gcs/o/data/x"  # where gcsfs reads the object gs://gf-gcs/data/x
    with LocalHTTPServer() as http:
        http.add(path, b"0123456789")
        location = Location("gs://gf-gcs/data/x", {"endpoint_url": http.base_url, "token": "anon"})
        assert read_bytes(location, 2, 5) == b"234"
        for status, error, words in [(403, RemoteAccessError, r"access was refused \(HTTP 403 Forbidden\)"),
                                     (401, RemoteAccessError, r"access was refused \(HTTP 401 Unauthorized\)"),
                                     (400, RemoteReadError, r"the server answered 400 Bad Request. Check the URL")]:
            http.fail(path, status, times=1)
            with pytest.raises(error, match=rf"could not read bytes 2 to 5 of gs://gf-gcs/data/x: {words}"):
                read_bytes(location, 2, 5)
        assert http.requests(path) == 4  # none was tried again


def test_an_unreachable_gcs_endpoint_is_one_clear_error_after_gcsfs_own_retries(unreachable_listings):
    pytest.importorskip("gcsfs", reason="gcsfs is in the test extra")
    done, took = unreachable_listings["gs"].result(timeout=300)  # started with the session
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: could not list gs://gf-nowhere/data/cache: the connection failed "
                                  "(ClientConnectorError), after gcsfs's own retries. The store or the network is "
                                  "failing"), done.stderr
    assert "Traceback" not in done.stderr and "trying again" not in done.stderr
    assert took < 120, f"{took:.0f} s: gcsfs tries 6 times over about 35 s; glyphforge must not multiply that"
