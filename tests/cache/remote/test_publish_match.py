"""What publish takes as "already there" (issue 30, rows 4 and 14).

Row 4: an object at a data file's place is kept (an interrupted publish resumes) only when
its bytes are the entry's (the store's MD5 of it where reliable, else its sha256 read back);
otherwise publish is an error naming it, and writes nothing, no manifest beside it. On every
backend glyphforge writes: ``file://``, ``s3://`` (moto's server, `support.s3_server`) and
``gs://`` (gcp-storage-emulator, `support.gcs_server`), with the real command line.

Row 14: publish copies from a local data dir; a URL data dir (``--data-dir s3://...``) is a
bad argument (exit status 2, before any work) saying what works instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import glyphforge as gf
from glyphforge.cache import CacheStore
from glyphforge.cache.entry import Entry
from glyphforge.cache.remote.publish import publish_entry
from glyphforge.storage.store_errors import RemoteStorageError

from support.cli import run_here
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec
from support.store_errors import REFUSED, store_failure
from support.toy_dataset import prepare_toy


@dataclass
class Target:
    """A data dir URL on one backend, and a fresh fsspec filesystem to look at it as a third party does."""

    url: str
    fs: Any

    def put(self, url: str, data: bytes) -> None:
        path = self.fs._strip_protocol(url)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)  # file://: its folders (a no-op on a store)
        self.fs.pipe_file(path, data)

    def objects(self, url: str) -> dict[str, bytes]:
        """The objects under ``url``, by name below it."""
        root = self.fs._strip_protocol(url)
        self.fs.invalidate_cache()
        return {path[len(root):].lstrip("/"): self.fs.cat_file(path) for path in self.fs.find(root)}

    def stamp(self, url: str) -> object:
        """What changes each time the object ``url`` is written: its version, generation, or inode and mtime."""
        path = self.fs._strip_protocol(url)
        if url.startswith("file://"):
            status = os.stat(path)
            return status.st_ino, status.st_mtime_ns
        self.fs.invalidate_cache()
        info = self.fs.info(path)
        return info.get("VersionId") or info["generation"]


@pytest.fixture(params=["file", "s3", "gs"])
def target(request, tmp_path) -> Target:
    """An empty data dir URL on the backend of the parameter (``s3://``: a versioned bucket)."""
    import fsspec

    if request.param == "file":
        url = (tmp_path / "target").as_uri()
    elif request.param == "s3":
        import boto3

        url = request.getfixturevalue("s3_server").bucket()
        boto3.client("s3").put_bucket_versioning(Bucket=url[5:], VersioningConfiguration={"Status": "Enabled"})
    else:
        url = request.getfixturevalue("gcs_server").bucket()
    fs, _ = fsspec.core.url_to_fs(url, skip_instance_cache=True)
    return Target(f"{url}/data", fs)


@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> Path:
    """A local data dir holding a small build (module-wide: only read)."""
    data_dir = tmp_path_factory.mktemp("local-data")
    gf.build(NoiseSpec(n_examples=40, shard_size=8, seed=3), data_dir=data_dir, progress=False).close()
    return data_dir


@pytest.fixture(scope="module")
def blob_data(tmp_path_factory) -> Path:
    """A local data dir holding an entry of a 24 MiB data file (3 parts of an ``s3://`` upload) and a 1 KB one."""
    data_dir = tmp_path_factory.mktemp("blob-data")
    with CacheStore.for_data_dir(data_dir).create("test-blob", {"size": "24MiB"}) as writer:
        (writer.path / "part-000000.pklz").write_bytes(os.urandom(24 << 20))
        (writer.path / "part-000001.pklz").write_bytes(os.urandom(1000))
    return data_dir


def only_entry(data_dir: Path, kind: str) -> Entry:
    [entry] = [entry for entry in CacheStore.for_data_dir(data_dir).ls() if entry.kind == kind]
    return entry


def local_files(entry: Entry) -> dict[str, bytes]:
    return {name: (entry.path / name).read_bytes() for name in [*entry.files, "manifest.json"]}


def interrupted(entry: Entry, target: Target, kept: str) -> str:
    """Publish ``entry`` to ``target``, then take away all but its data file ``kept``, as a publish killed once
    ``kept`` was up leaves it; return the entry's URL."""
    place = publish_entry(entry, target.url, progress=False).url
    for name in [*entry.files, "manifest.json"]:
        if name != kept:
            target.fs.rm_file(target.fs._strip_protocol(f"{place}/{name}"))
    assert set(target.objects(place)) == {kept}
    return place


# -- row 4: an object at the entry's place is "already there" only when its bytes are the entry's ------------------
def test_an_object_of_the_right_size_but_other_bytes_is_refused_by_name_and_nothing_is_written(target, local_data):
    entry = only_entry(local_data, "test-noise")
    place = f"{target.url}/cache/test-noise/{entry.key}"
    foreign = os.urandom((entry.path / "arrays.pklz").stat().st_size)
    target.put(f"{place}/arrays.pklz", foreign)

    result = run_here("glyphforge", "publish", "test-noise", target.url, "--data-dir", local_data)

    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert f"{place}/arrays.pklz is of the right size but holds other bytes (their sha256 is " in result.stderr
    assert "wrote nothing there (no manifest beside it). Delete it if it is yours" in result.stderr
    assert "or publish to another data dir URL" in result.stderr
    assert result.stdout == ""
    assert target.objects(place) == {"arrays.pklz": foreign}  # nothing uploaded, nothing replaced, no manifest


def test_an_interrupted_publish_resumes_keeping_the_file_that_is_there_whole(target, blob_data):
    entry = only_entry(blob_data, "test-blob")
    place = interrupted(entry, target, kept="part-000000.pklz")
    before = target.stamp(f"{place}/part-000000.pklz")

    published = publish_entry(entry, target.url, progress=False)

    assert (published.uploaded, published.present, published.manifest_uploaded) == (
        ("part-000001.pklz",), ("part-000000.pklz",), True)
    assert target.stamp(f"{place}/part-000000.pklz") == before  # not uploaded again
    assert target.objects(place) == local_files(entry)


def test_a_resume_on_s3_checks_a_multipart_object_by_its_etag_without_reading_it_back(s3_server, blob_data):
    target = Target(f"{s3_server.bucket()}/data", s3_server.fs())
    entry = only_entry(blob_data, "test-blob")
    place = interrupted(entry, target, kept="part-000000.pklz")
    assert target.fs.info(f"{place}/part-000000.pklz"[5:])["ETag"].endswith('-3"')  # 3 parts of 8 MiB
    may_not_read = s3_server.user_denied(target.url.removesuffix("/data"), "s3:GetObject", "*.pklz")

    with s3_server.checking_credentials():
        published = publish_entry(entry, target.url, storage_options=may_not_read, progress=False)

    assert published.present == ("part-000000.pklz",)
    assert target.objects(place) == local_files(entry)


def test_the_right_bytes_in_parts_of_another_size_are_read_back_then_kept(s3_server, blob_data):
    target = Target(f"{s3_server.bucket()}/data", s3_server.fs())
    entry = only_entry(blob_data, "test-blob")
    place = f"{target.url}/cache/test-blob/{entry.key}"
    big = entry.path / "part-000000.pklz"
    target.fs.put_file(str(big), f"{place}/part-000000.pklz"[5:], chunksize=5 << 20)  # another tool's 5 parts
    assert target.fs.info(f"{place}/part-000000.pklz"[5:])["ETag"].endswith('-5"')
    may_not_read = s3_server.user_denied(target.url.removesuffix("/data"), "s3:GetObject", "*.pklz")
    with s3_server.checking_credentials(), pytest.raises(  # its ETag decides nothing: it is read back
            RemoteStorageError, match=store_failure("publish to", place, REFUSED, "checking the data files already")):
        publish_entry(entry, target.url, storage_options=may_not_read, progress=False)

    published = publish_entry(entry, target.url, progress=False)

    assert published.present == ("part-000000.pklz",)
    assert target.objects(place) == local_files(entry)


# -- row 14: publish copies from a local data dir -----------------------------------------------------------------
@pytest.mark.parametrize("source", ["s3://gf-other-bucket/y", "gs://gf-other-bucket/y"])
@pytest.mark.parametrize("given", ["--data-dir", "GLYPHFORGE_DATA_DIR"])
def test_a_url_data_dir_to_publish_from_exits_2_before_any_work_saying_what_works(tmp_path, source, given):
    argv = ["--data-dir", source] if given == "--data-dir" else []
    env = {"GLYPHFORGE_CACHE_DIR": str(tmp_path / "local-cache")}
    if given != "--data-dir":
        env["GLYPHFORGE_DATA_DIR"] = source
    result = run_here("glyphforge", "publish", "scenes", (tmp_path / "target").as_uri(), *argv, cwd=tmp_path, env=env)

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"publish copies an entry from a local data dir, and the data dir {source} is a URL" in result.stderr
    assert "`glyphforge build ... --data-dir TARGET` builds into it" in result.stderr
    assert "with the store's own tool" in result.stderr and "its manifest.json last" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no target, no local cache: nothing was done


def test_a_file_url_data_dir_is_the_local_directory_it_names(tmp_path):
    [entry] = prepare_toy(data_dir=tmp_path / "local", level=4)

    result = run_here("glyphforge", "publish", "toy", (tmp_path / "target").as_uri(),
                      "--data-dir", (tmp_path / "local").as_uri())

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{(tmp_path / 'target' / 'cache' / 'toy' / entry.key).as_uri()}\n"
