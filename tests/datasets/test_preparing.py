"""`glyphforge.prepare`: a dataset prepared into a data dir from Python, as ``prepare-data`` does (issue 31).

On a local data dir (a path or ``file://``) the entries are made in place; on one at a URL
(``s3://`` on moto, ``gs://`` on the emulator) they are made in this machine's local cache,
published there and the request recorded at ``<url>/prepared/``, so the same call from a
machine with an empty local cache finds them and does no local work. The toy dataset
(registered as a third party would) keeps it small; tests/cache/remote/test_publish.py runs the same
workflow through the ``prepare-data`` command.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.cache import CacheStore
from glyphforge.cache.remote.prepared import request_key
from glyphforge.datasets import registry

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.toy_dataset import CLASSES, register_toy, squares


@pytest.fixture
def toy() -> Iterator[None]:
    """The toy dataset registered for the test."""
    register_toy()
    yield
    registry.unregister("toy")


@pytest.fixture(params=["path", "file", "s3", "gs"])
def data_dir(request, tmp_path) -> str:
    """A data dir of each kind: a plain path, a ``file://`` URL, ``s3://`` (moto), ``gs://`` (emulator)."""
    if request.param == "path":
        return str(tmp_path / "data")
    if request.param == "file":
        return (tmp_path / "data").as_uri()
    store = request.getfixturevalue("s3_server" if request.param == "s3" else "gcs_server")
    return f"{store.bucket()}/data"


def stored(url: str) -> dict[str, bytes]:
    """The objects under the data dir URL ``url`` (a fresh filesystem: no listing cache), by name below it."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True)
    return {path[len(root):].lstrip("/"): fs.cat_file(path) for path in fs.find(root)}


def test_a_dataset_prepared_into_any_data_dir_loads_from_there_on_a_machine_with_an_empty_cache(
    toy, data_dir, tmp_path
):
    here = gf.DataContext.resolve(data_dir=data_dir, cache_dir=tmp_path / "here", progress=False)
    done = gf.prepare("toy", level=9, context=here)

    assert isinstance(done, gf.Prepared) and done.dataset == "toy" and done.made and not done.found
    [entry] = done.entries
    assert entry.params == {"level": 9}
    elsewhere = gf.DataContext.resolve(data_dir=data_dir, cache_dir=tmp_path / "elsewhere", download=False)
    x, _, names = gf.load("toy", level=9, context=elsewhere)  # download=False: found there, or an error
    assert np.array_equal(x, squares(9)) and names == CLASSES

    again = gf.prepare("toy", level=9, data_dir=data_dir, cache_dir=tmp_path / "third", progress=False)

    assert not again.made
    if "://" in data_dir and not data_dir.startswith("file://"):  # at a URL: found whole there, nothing done here
        assert again.found and again.urls == done.urls == (f"{data_dir}/cache/toy/{entry.key}",)
        assert again.entries == () and not (tmp_path / "third").exists()
    else:  # a local data dir: its cache hit
        assert [found.key for found in again.entries] == [entry.key] and again.urls == again.published == ()


def test_into_a_url_the_entries_are_published_and_the_request_recorded(toy, s3_server, tmp_path):
    data = f"{s3_server.bucket()}/data"

    done = gf.prepare("toy", level=7, shapes=[(8, 8)], data_dir=data, cache_dir=tmp_path / "here", progress=False)

    [entry] = CacheStore.for_data_dir(tmp_path / "here" / "data").ls()  # made in the local cache's data dir
    [published] = done.published
    assert not published.already and published.url == f"{data}/cache/toy/{entry.key}"
    objects = stored(data)
    assert {name: objects[f"cache/toy/{entry.key}/{name}"] for name in [*entry.files, "manifest.json"]} == {
        name: (entry.path / name).read_bytes() for name in [*entry.files, "manifest.json"]}
    record = json.loads(objects[f"prepared/toy/{request_key('toy', {'level': 7}, [(8, 8)])}.json"])
    assert [(item["kind"], item["key"]) for item in record["entries"]] == [("toy", entry.key)]

    again = gf.prepare("toy", level=7, shapes=[(8, 8)], data_dir=data, cache_dir=tmp_path / "elsewhere")

    assert again.found and again.urls == (published.url,) and not (tmp_path / "elsewhere").exists()


def test_without_verifying_nothing_is_recorded_and_the_next_call_prepares_again(toy, s3_server, tmp_path):
    data = f"{s3_server.bucket()}/data"
    done = gf.prepare("toy", data_dir=data, verify=False, cache_dir=tmp_path / "here", progress=False)

    assert [item.already for item in done.published] == [False]
    assert not any(name.startswith("prepared/") for name in stored(data))

    again = gf.prepare("toy", data_dir=data, verify=False, cache_dir=tmp_path / "elsewhere", progress=False)

    assert not again.found and again.made and [item.already for item in again.published] == [True]


def test_a_record_glyphforge_did_not_write_is_left_untouched_and_nothing_is_done(toy, s3_server, tmp_path):
    data = f"{s3_server.bucket()}/data"
    record = f"prepared/toy/{request_key('toy', {'level': 4}, [])}.json"
    s3_server.fs().pipe_file(f"{data}/{record}"[5:], b"someone else's notes")

    with pytest.raises(gf.PublishConflictError, match="is not glyphforge's record of this prepare-data request"):
        gf.prepare("toy", level=4, data_dir=data, cache_dir=tmp_path / "cache", progress=False)

    assert stored(data) == {record: b"someone else's notes"}
    assert not (tmp_path / "cache").exists()


def test_a_read_only_data_dir_is_refused_before_any_work(toy, tmp_path):
    with pytest.raises(ValueError, match="which glyphforge only reads"):
        gf.prepare("toy", data_dir="https://example.org/data", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_an_unregistered_name_is_a_key_error_naming_the_registered_ones(tmp_path):
    with pytest.raises(KeyError, match="mnist"):
        gf.prepare("no-such-dataset", data_dir=tmp_path)
