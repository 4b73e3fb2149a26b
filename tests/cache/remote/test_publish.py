"""Publishing cache entries to a data dir URL (issue #25): `glyphforge.publish`, ``BuiltDataset.publish``,
``glyphforge publish`` and ``prepare-data --data-dir URL``.

Everything real: moto's S3 server on 127.0.0.1 (`support.s3_server`), with bucket versioning
on so that the server itself counts the puts of each object (one version per upload), its
IAM checks switched on (moto's ``/moto-api/reset-auth``) for wrong credentials and for a
user denied the manifest's put; ``file://`` directories; the real command line in
subprocesses, killed with SIGKILL mid-upload.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import glyphforge as gf
from glyphforge._files import current_umask
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache import CacheStore
from glyphforge.cache.keys import entry_sha256
from glyphforge.cache.remote.prepared import request_key
from glyphforge.cache.remote.publish import PublishConflictError, publish_entry
from glyphforge.datasets import registry
from glyphforge.errors import StorageError
from glyphforge.storage.store_errors import RemoteStorageError

from support.cli import BIN, run, run_here
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec
from support.store_errors import NO_BUCKET, REFUSED, store_failure
from support.toy_dataset import prepare_toy, register_toy
from support.waits import wait_until

TESTS_DIR = Path(__file__).resolve().parents[2]


# -- fixtures and helpers -------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> Path:
    """A local data dir holding a small build and a toy entry (module-wide: only read)."""
    data_dir = tmp_path_factory.mktemp("local-data")
    gf.build(NoiseSpec(n_examples=40, shard_size=8, seed=3), data_dir=data_dir, progress=False).close()
    prepare_toy(data_dir=data_dir, level=5)
    return data_dir


@pytest.fixture
def blob_data(tmp_path) -> Path:
    """A local data dir holding an entry of two data files, 25 MB and 1 KB (the test evicts what it can)."""
    with CacheStore.for_data_dir(tmp_path).create("test-blob", {"size": "25MB"}) as writer:
        # publish never reads what a data file holds: incompressible bytes, as a large built part would be
        (writer.path / "part-000000.pklz").write_bytes(os.urandom(24 << 20))
        (writer.path / "part-000001.pklz").write_bytes(os.urandom(1000))
    return tmp_path


@pytest.fixture
def built(local_data) -> Iterator[BuiltDataset]:
    dataset = find_built("test-noise", data_dir=local_data)
    yield dataset
    dataset.close()


def entry_of(local_data: Path, kind: str):
    [entry] = [entry for entry in CacheStore.for_data_dir(local_data).ls() if entry.kind == kind]
    return entry


def s3_client():
    import boto3

    return boto3.client("s3")  # AWS_ENDPOINT_URL and the credentials: the s3_server fixture's environment


def versioned_bucket(s3_server) -> str:
    """A new bucket whose objects keep every version: the server's count of the puts of each key."""
    url = s3_server.bucket()
    s3_client().put_bucket_versioning(Bucket=url[5:], VersioningConfiguration={"Status": "Enabled"})
    return url


def puts(url: str) -> Counter[str]:
    """How many times each object under the ``s3://`` URL ``url`` was written (its versions), by name below it."""
    bucket, _, prefix = url[5:].partition("/")
    versions = s3_client().list_object_versions(Bucket=bucket, Prefix=prefix).get("Versions", [])
    return Counter(version["Key"][len(prefix):].lstrip("/") for version in versions)


def objects(url: str) -> dict[str, bytes]:
    """The objects under ``url`` (a fresh s3fs: no listing cache), by name below it."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True)
    return {path[len(root):].lstrip("/"): fs.cat_file(path) for path in fs.find(root)}


def local_files(entry) -> dict[str, bytes]:
    """An entry's data files and manifest, by name."""
    return {name: (entry.path / name).read_bytes() for name in [*entry.files, "manifest.json"]}


def publish_command(*argv: str | Path, env: dict[str, str] | None = None,
                    here: bool = False) -> subprocess.CompletedProcess[str]:
    """``glyphforge publish``: a real process, or (``here``) its entry point in this one."""
    return (run_here if here else run)("glyphforge", "publish", *argv, env=env)


# -- publish: what lands at the URL -------------------------------------------------------------
def test_a_built_entry_lands_byte_for_byte_at_the_url_open_built_takes(s3_server, built):
    bucket = versioned_bucket(s3_server)
    url = built.publish(f"{bucket}/data", progress=False)

    assert url == f"{bucket}/data/cache/test-noise/{built.key}"
    assert objects(url) == local_files(built.entry)  # the data files and the manifest, nothing else
    assert puts(url) == {"arrays.pklz": 1, "blocks.npy": 1, "index.npy": 1, "manifest.json": 1}


def test_a_prepared_entry_lands_in_a_file_url_data_dir_with_modes_of_the_umask(local_data, tmp_path):
    target = tmp_path / "published"
    url = gf.publish("toy", target.as_uri(), data_dir=local_data, progress=False)

    entry = entry_of(local_data, "toy")
    place = target / "cache" / "toy" / entry.key
    assert url == place.as_uri()
    assert {path.name: path.read_bytes() for path in place.iterdir()} == local_files(entry)  # no temporary left
    assert {path.stat().st_mode & 0o777 for path in place.iterdir()} == {0o666 & ~current_umask()}


def test_a_built_entry_published_by_key_prefix_to_a_file_url_is_an_entry_glyphforge_reads_there(
        local_data, built, tmp_path):
    url = gf.publish(built.key[:8], (tmp_path / "published").as_uri(), data_dir=local_data, progress=False)

    assert url == (tmp_path / "published" / "cache" / "test-noise" / built.key).as_uri()
    copy = find_built("test-noise", data_dir=tmp_path / "published")
    try:
        assert copy.key == built.key and copy.path == tmp_path / "published" / "cache" / "test-noise" / built.key
        assert all((copy.take(range(len(copy)))[name] == array).all() for name, array in built.arrays.items())
    finally:
        copy.close()


def test_the_manifest_is_written_last_a_denied_manifest_leaves_the_whole_data_files_and_a_rerun_adds_it(
        s3_server, built):
    bucket = versioned_bucket(s3_server)
    place = f"{bucket}/data/cache/test-noise/{built.key}"
    options = s3_server.user_denied_puts(bucket, "*/manifest.json")
    with s3_server.checking_credentials(), pytest.raises(StorageError) as raised:
        built.publish(f"{bucket}/data", storage_options=options, progress=False)

    message = str(raised.value)
    assert re.search(store_failure("publish to", f"{place}/manifest.json", REFUSED, "uploading manifest.json"), message)
    assert options["secret"] not in message
    everything = local_files(built.entry)
    assert objects(place) == {name: everything[name] for name in built.entry.files}  # all data, no manifest

    published = publish_entry(built.entry, f"{bucket}/data", progress=False)  # the fixture's credentials
    assert (published.uploaded, published.present, published.manifest_uploaded) == ((), tuple(built.entry.files), True)
    assert objects(place) == everything
    # no data file sent twice
    assert puts(place) == {"arrays.pklz": 1, "blocks.npy": 1, "index.npy": 1, "manifest.json": 1}


@pytest.mark.slow
def test_a_publish_killed_mid_upload_resumes_with_the_missing_file_only_and_held_the_entry_meanwhile(
        s3_server, blob_data):
    bucket = versioned_bucket(s3_server)
    entry = entry_of(blob_data, "test-blob")
    place = f"{bucket}/data/cache/test-blob/{entry.key}"
    child = subprocess.Popen([str(BIN / "glyphforge"), "publish", "test-blob", f"{bucket}/data", "--data-dir",
                              str(blob_data), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "part-000001.pklz" in puts(place), "the small part at the URL", process=child)
        eviction = CacheStore.for_data_dir(blob_data).evict(0)  # `cache gc --max-size 0` while it uploads
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=120)
    assert entry in eviction.in_use and entry.path.is_dir()  # the uploader's read lock kept it
    assert puts(place) == {"part-000001.pklz": 1}  # the large part was not whole yet: no object, no manifest

    again = publish_command("test-blob", f"{bucket}/data", "--data-dir", blob_data, here=True)

    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{place}\n"
    assert "published 1 file (25.2 MB) and the manifest" in again.stderr and "1 file already there" in again.stderr
    assert objects(place) == local_files(entry)
    assert puts(place) == {"part-000000.pklz": 1, "part-000001.pklz": 1, "manifest.json": 1}


def test_publishing_again_uploads_nothing_and_says_already_published(s3_server, local_data):
    bucket = versioned_bucket(s3_server)
    first = publish_command("toy", f"{bucket}/data", "--data-dir", local_data, here=True)
    second = publish_command("toy", f"{bucket}/data", "--data-dir", local_data, here=True)

    key = entry_of(local_data, "toy").key
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert first.stdout == second.stdout == f"{bucket}/data/cache/toy/{key}\n"
    assert "already published, nothing uploaded" in second.stderr
    assert puts(f"{bucket}/data") == {f"cache/toy/{key}/squares.pklz": 1, f"cache/toy/{key}/manifest.json": 1}


# -- publish: what is not ours is never replaced ------------------------------------------------
def test_a_data_file_of_another_size_at_the_entrys_place_is_refused_and_left_untouched(s3_server, built):
    bucket = s3_server.bucket()
    place = f"{bucket}/data/cache/test-noise/{built.key}"
    s3_server.fs().pipe_file(f"{place}/arrays.pklz"[5:], b"not glyphforge's")

    with pytest.raises(PublishConflictError) as raised:
        built.publish(f"{bucket}/data", progress=False)

    assert f"{place}/arrays.pklz is 16 bytes, the entry's is" in str(raised.value)
    assert "leaves it as it is" in str(raised.value)
    assert objects(place) == {"arrays.pklz": b"not glyphforge's"}  # nothing uploaded, nothing replaced


def test_another_manifest_at_the_entrys_place_is_refused_and_left_untouched(s3_server, built):
    bucket = s3_server.bucket()
    place = f"{bucket}/data/cache/test-noise/{built.key}"
    other = json.loads((built.path / "manifest.json").read_text())
    other["files"]["arrays.pklz"]["size"] += 1  # another version of the entry (other bytes), a valid manifest
    other["entry_sha256"] = entry_sha256(other["kind"], other["key"], other["params"], other["meta"], other["files"])
    s3_server.fs().pipe_file(f"{place}/manifest.json"[5:], json.dumps(other).encode())

    with pytest.raises(PublishConflictError, match="already holds another version of the test-noise entry"):
        built.publish(f"{bucket}/data", progress=False)
    assert objects(place) == {"manifest.json": json.dumps(other).encode()}


def test_a_directory_where_the_manifest_goes_is_refused_and_left_untouched(built, tmp_path):
    blocked = tmp_path / "target" / "cache" / "test-noise" / built.key / "manifest.json"
    blocked.mkdir(parents=True)

    with pytest.raises(PublishConflictError, match=f"{blocked.as_uri()} is not a file: glyphforge did not write it"):
        built.publish((tmp_path / "target").as_uri(), progress=False)
    assert [path.name for path in blocked.parent.iterdir()] == ["manifest.json"] and blocked.is_dir()


# -- publish: errors of the store ------------------------------------------------------------------
def test_a_missing_bucket_is_named_and_not_created(s3_server, built):
    manifest = f"s3://gf-no-such-bucket/data/cache/test-noise/{built.key}/manifest.json"
    with pytest.raises(RemoteStorageError, match=store_failure("publish to", manifest, NO_BUCKET, "reading manifest")):
        built.publish("s3://gf-no-such-bucket/data", progress=False)
    assert not s3_server.fs().exists("gf-no-such-bucket")


def test_wrong_credentials_are_named_without_the_secret(s3_server, local_data):
    bucket = s3_server.bucket()
    secret = "wrong-secret-Zq8rT2"
    with s3_server.checking_credentials():
        result = publish_command("toy", f"{bucket}/data", "--data-dir", local_data,
                                 env={"AWS_ACCESS_KEY_ID": "AKIAWRONGKEY", "AWS_SECRET_ACCESS_KEY": secret})

    assert result.returncode == 1
    assert result.stderr.startswith("error: ")
    manifest = f"{bucket}/data/cache/toy/{entry_of(local_data, 'toy').key}/manifest.json"
    assert re.search(store_failure("publish to", manifest, REFUSED, "reading manifest.json"), result.stderr)
    assert secret not in result.stderr + result.stdout
    assert objects(bucket) == {}


@pytest.mark.parametrize(("url", "expected"), [
    ("published-here", "'published-here' is not a URL: publish to a data dir URL such as s3://"),
    ("https://example.org/data", "https:// URL, which glyphforge only reads"),
    ("nosuch://bucket/data", "nosuch://bucket/data: glyphforge does not support nosuch:// URLs"),
])
def test_a_url_glyphforge_cannot_publish_to_exits_2_before_any_work(local_data, tmp_path, url, expected):
    result = run_here("glyphforge", "publish", "toy", url, "--data-dir", local_data, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_target_that_matches_nothing_exits_2_listing_what_the_cache_holds(local_data, tmp_path):
    result = publish_command("nothing-here", (tmp_path / "target").as_uri(), "--data-dir", local_data, here=True)

    assert result.returncode == 2
    assert "nothing to publish matches 'nothing-here'" in result.stderr
    assert "holds kinds test-noise, toy: give a kind or a cache key (prefix)" in result.stderr
    assert not (tmp_path / "target").exists()


# -- prepare-data into a URL data dir -----------------------------------------------------------
def toy_command(*argv: str, cache_dir: Path, here: bool = False) -> subprocess.CompletedProcess[str]:
    """``prepare-data`` with the toy dataset registered and its own local cache: in a fresh process, as a run on
    another machine would be, or (``here``) in this one, where one run is all there is."""
    if here:
        register_toy()
        try:
            return run_here(*argv, env={"GLYPHFORGE_CACHE_DIR": str(cache_dir)})
        finally:
            registry.unregister("toy")
    return subprocess.run([sys.executable, "-m", "support.toy_dataset", *argv], capture_output=True, text=True,
                          timeout=300, cwd=TESTS_DIR, env={**os.environ, "GLYPHFORGE_CACHE_DIR": str(cache_dir)})


def test_prepare_data_into_a_url_publishes_there_and_a_later_run_anywhere_does_no_local_work(s3_server, tmp_path):
    data = f"{versioned_bucket(s3_server)}/data"
    first = toy_command("prepare-data", "toy", "--toy-level", "9", "--data-dir", data, "--no-warmup",
                        cache_dir=tmp_path / "here")

    assert first.returncode == 0, first.stderr
    [entry] = CacheStore.for_data_dir(tmp_path / "here" / "data").ls()  # prepared in the local cache's data dir
    place = f"{data}/cache/toy/{entry.key}"
    assert f"toy: published to {place}\n" in first.stdout
    assert objects(place) == local_files(entry)

    second = toy_command("prepare-data", "toy", "--toy-level", "9", "--data-dir", data, "--no-warmup",
                         cache_dir=tmp_path / "elsewhere")

    assert second.returncode == 0, second.stderr
    assert second.stdout == f"toy: already at {data} (1 entry), nothing to do\n"
    assert not (tmp_path / "elsewhere" / "data").exists()  # nothing prepared, nothing fetched
    assert {name: count for name, count in puts(data).items() if name.startswith("cache/")} == {
        f"cache/toy/{entry.key}/squares.pklz": 1, f"cache/toy/{entry.key}/manifest.json": 1}


def test_prepare_data_prepares_again_what_is_no_longer_whole_at_the_url(s3_server, tmp_path):
    data = f"{s3_server.bucket()}/data"
    first = toy_command("prepare-data", "toy", "--data-dir", data, "--no-warmup", cache_dir=tmp_path / "a")
    assert first.returncode == 0, first.stderr
    [entry] = CacheStore.for_data_dir(tmp_path / "a" / "data").ls()
    s3_server.fs().rm_file(f"{data}/cache/toy/{entry.key}/manifest.json"[5:])  # the entry is gone for readers

    again = toy_command("prepare-data", "toy", "--data-dir", data, "--no-warmup", cache_dir=tmp_path / "b")

    assert again.returncode == 0, again.stderr
    assert f"toy: published to {data}/cache/toy/{entry.key}\n" in again.stdout
    [made_again] = CacheStore.for_data_dir(tmp_path / "b" / "data").ls()
    assert objects(f"{data}/cache/toy/{entry.key}") == local_files(made_again)


def test_prepare_data_leaves_a_record_it_did_not_write_untouched(s3_server, tmp_path):
    data = f"{s3_server.bucket()}/data"
    record = f"{data}/prepared/toy/{request_key('toy', {'level': 4}, [])}.json"
    s3_server.fs().pipe_file(record[5:], b"someone else's notes")

    result = toy_command("prepare-data", "toy", "--toy-level", "4", "--data-dir", data, "--no-warmup",
                         cache_dir=tmp_path / "cache", here=True)

    assert result.returncode == 1
    assert f"error: {record} is not glyphforge's record of this prepare-data request: glyphforge did not write it" \
        in result.stderr
    assert objects(data) == {record[len(data) + 1:]: b"someone else's notes"}
    assert not (tmp_path / "cache").exists()  # refused before any work


def test_prepare_data_refuses_an_http_data_dir_before_any_work(tmp_path):
    result = toy_command("prepare-data", "toy", "--data-dir", "https://example.org/data", "--no-warmup",
                         cache_dir=tmp_path / "cache", here=True)
    assert result.returncode == 2
    assert "prepare-data publishes what it prepares to the URL data dir" in result.stderr
    assert "glyphforge only reads" in result.stderr
    assert not (tmp_path / "cache").exists()


# -- a file:// target: what a killed publish leaves is removed; what a user put there is never replaced -------------
def killed_mid_file(local_data: Path, target: Path) -> Path:
    """Run a publish of the test-noise entry to ``target`` and SIGKILL it once a data file is partly written; return
    the temporary file it left."""
    child = subprocess.Popen([sys.executable, "-m", "support.publish_child", str(local_data), "test-noise",
                              target.as_uri()], cwd=TESTS_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "staged\n", child.stderr
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=120)
    [left] = [path for path in target.rglob("*.tmp")]
    assert re.fullmatch(r"\.arrays\.pklz\.[a-z0-9_]{8}\.tmp", left.name)
    return left


@pytest.mark.parametrize("then", [["glyphforge", "publish", "test-noise", "{url}", "--data-dir", "{local}"],
                                  ["glyphforge", "cache", "gc", "--data-dir", "{target}"]],
                         ids=["publish again", "cache gc"])
def test_what_a_killed_file_publish_left_is_removed_by_the_next_publish_or_gc_and_nothing_else(
        local_data, tmp_path, then):
    """Issue #42 row 21: a ``kill -9`` mid-file leaves ``.<file>.<random>.tmp``; the rerun or ``cache gc`` removes it
    (after a complete publish, for gc), and no file of the user's that merely looks alike."""
    target = tmp_path / "target"
    left = killed_mid_file(local_data, target)
    place = left.parent
    if then[1] == "cache":  # the entry completed since, as a rerun before this fix left it: the file still there
        aside = left.rename(tmp_path / left.name)
        assert publish_command("test-noise", target.as_uri(), "--data-dir", local_data, here=True).returncode == 0
        aside.rename(left)
    users = [place / ".arrays.pklz.notes.tmp", place / ".mine.abcdefgh.tmp", place / "arrays.pklz.abcdefgh.tmp"]
    for path in users:
        path.write_bytes(b"the user's")

    done = run_here(*[arg.format(url=target.as_uri(), local=local_data, target=target) for arg in then])

    assert done.returncode == 0, done.stderr
    assert not left.exists()
    assert [path.read_bytes() for path in users] == [b"the user's"] * 3
    entry = entry_of(local_data, "test-noise")
    assert {path.name: path.read_bytes() for path in place.iterdir() if path not in users} == local_files(entry)


def test_a_live_writers_temporary_file_is_never_removed(local_data, tmp_path):
    """Only what no live process writes is removed: a publish beside a live (stalled) one keeps its file."""
    target = tmp_path / "target"
    child = subprocess.Popen([sys.executable, "-m", "support.publish_child", str(local_data), "test-noise",
                              target.as_uri()], cwd=TESTS_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "staged\n", child.stderr
        [live] = list(target.rglob("*.tmp"))
        assert publish_command("test-noise", target.as_uri(), "--data-dir", local_data, here=True).returncode == 0
        assert live.exists()
    finally:
        child.kill()
        child.communicate(timeout=120)


@pytest.mark.parametrize("name", ["arrays.pklz", "blocks.npy", "index.npy", "manifest.json"])
@pytest.mark.parametrize("points_to", ["a file", "nothing"])
def test_a_users_symlink_at_a_files_place_on_a_file_target_is_refused_by_name_and_left_as_it_is(
        local_data, tmp_path, name, points_to):
    """Issue #42 row 10: a link at any of the entry's places (data files, manifest) is not glyphforge's: the publish
    is refused naming it, the link stays, and nothing is published. (On object stores, which hold no links, an
    object glyphforge did not write is refused by its bytes: test_publish_match.py.)"""
    entry = entry_of(local_data, "test-noise")
    assert set(entry.files) == {"arrays.pklz", "blocks.npy", "index.npy"}
    target = tmp_path / "target"
    place = target / "cache" / "test-noise" / entry.key
    place.mkdir(parents=True)
    mine = tmp_path / "mine.bin"
    if points_to == "a file":
        mine.write_bytes(b"mine")
    (place / name).symlink_to(mine)

    result = publish_command("test-noise", target.as_uri(), "--data-dir", local_data, here=True)

    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (f"error: {(place / name).as_uri()} is a symbolic link (to {mine}): glyphforge did not write it, and "
            "leaves it as it is (nothing was published)") in result.stderr
    assert [path.name for path in place.iterdir()] == [name] and os.readlink(place / name) == str(mine)
    assert mine.read_bytes() == b"mine" if points_to == "a file" else not mine.exists()
