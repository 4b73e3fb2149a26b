"""Issue 30, rows 8 to 10: what a built entry's manifest declares is bounded before anything is fetched or allocated
by it, and what glyphforge rejects at a URL leaves nothing in its local cache.

Hostile entries are written as anyone who can write the entry's place would: the data files
changed, the manifest's hashes recomputed (`make_manifest`). Each is served over HTTP (the
project's Range server, which counts the bytes it sends) and S3 (moto on 127.0.0.1), and opened
with a fresh local cache (conftest); a file:// data dir is its path, so row 10 is checked on disk.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import ShardError, build
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import CacheStore, DamagedPklzError
from glyphforge.cache.declared import MAX_SHARDS
from glyphforge.cache.keys import entry_sha256, metadata_sha256
from glyphforge.cache.manifest import DamagedManifestError, make_manifest, read_manifest
from glyphforge.cache.remote.files import DamagedRemoteEntryError
from glyphforge.storage import Location

from support.cli import run_here
from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec, RowSpec
from support.toy_dataset import load_toy, prepared_toy

ARRAYS = "arrays.pklz"
#: The stores a data dir URL is read from through the shard cache (a file:// data dir is its path, read as on disk:
#: the on-disk tests below); a whole-object read also runs on a file:// `Location`, which publish writes through.
BACKENDS = ["http", "s3"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A local build of 1,030 rows in 11 shards."""
    return build(RowSpec(), data_dir=tmp_path_factory.mktemp("built"), progress=False)


class Place:
    """Where a test puts a hostile entry: a data dir at a URL, on one backend; ``served`` counts HTTP's bytes."""

    def __init__(self, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.backend = backend
        self.http: LocalHTTPServer | None = None
        if backend == "http":
            self.http = LocalHTTPServer().start()
            self.data_dir = self.http.url("data")
        elif backend == "s3":
            self.data_dir = request.getfixturevalue("s3_server").bucket() + "/data"
        else:
            self.data_dir = f"file://{tmp_path}/remote"

    def put(self, kind: str, key: str, files: dict[str, bytes]) -> str:
        """Put ``files`` (the manifest last) as entry ``kind``/``key``; return the entry's URL."""
        url = f"{self.data_dir}/cache/{kind}/{key}"
        for name in sorted(files, key=lambda name: name == "manifest.json"):
            if self.http is not None:
                self.http.add(f"data/cache/{kind}/{key}/{name}", files[name])
            else:
                location = Location(f"{url}/{name}")
                location.fs.makedirs(location.path.rsplit("/", 1)[0], exist_ok=True)
                location.fs.pipe_file(location.path, files[name])
        return url

    def served(self, kind: str, key: str, name: str) -> int | None:
        """Body bytes the HTTP server sent of the entry's file ``name`` (None on the other backends)."""
        return None if self.http is None else self.http.bytes_served(f"data/cache/{kind}/{key}/{name}")


@pytest.fixture(params=BACKENDS)
def place(request, tmp_path) -> Iterator[Place]:
    yield from _place(request, tmp_path)


@pytest.fixture(params=[*BACKENDS, "file"])
def any_place(request, tmp_path) -> Iterator[Place]:
    yield from _place(request, tmp_path)


def _place(request, tmp_path) -> Iterator[Place]:
    where = Place(request.param, tmp_path, request)
    yield where
    if where.http is not None:
        where.http.stop()


def hostile(entry, files: dict[str, bytes], meta: dict | None = None) -> dict[str, bytes]:
    """The entry's files with ``files`` replaced and its manifest written again to match (hashes recomputed), its
    meta ``meta`` as given (not normalised: a hand-written manifest may say 4.0 for 4)."""
    data = {name: (entry.path / name).read_bytes() for name in entry.files}
    data.update(files)
    table = {name: {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()} for name, body in data.items()}
    meta = entry.meta if meta is None else meta
    manifest = make_manifest(entry.kind, entry.key, entry.params, table, meta)
    manifest.update(meta=meta, meta_sha256=metadata_sha256(entry.kind, entry.key, entry.params, meta),
                    entry_sha256=entry_sha256(entry.kind, entry.key, entry.params, meta, table))
    return {**data, "manifest.json": json.dumps(manifest).encode()}


def npy(table: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    return buffer.getvalue()


def local_files(root: Path) -> list[str]:
    """The files glyphforge keeps under ``root`` (its lock files aside)."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*")
                  if path.is_file() and not path.name.endswith((".lock", ".readers", ".holder")))


def local_cache() -> Path:
    return Path(os.environ["GLYPHFORGE_CACHE_DIR"])


# -- row 8: an index far larger than the entry's shards -----------------------------------------------------
def test_an_index_larger_than_its_shards_make_is_refused_before_a_byte_of_it_is_fetched(built, place):
    entry = built.entry
    shards = MAX_SHARDS + 1  # row 8 had 20M shards (640 MB); past the limit is enough to tell, at a 32 MB test cost
    files = hostile(entry, {INDEX_FILE: npy(np.zeros((4, shards), np.int64))})
    declared = len(files[INDEX_FILE])
    url = place.put(entry.kind, entry.key, files)
    with pytest.raises(DamagedRemoteEntryError, match=(
            rf"^{url}/manifest.json is not a valid manifest: it declares what no built dataset holds: its files "
            rf"table records {INDEX_FILE} as {declared:,} bytes, where an index of its 11 shards is 352 to 4,448 "
            rf"bytes \(32 a shard and a header\)\. The entry at {url} is damaged .*delete everything under {url}/ "
            "with the store's own tools")):
        gf.open_built(url)[0]
    assert place.served(entry.kind, entry.key, INDEX_FILE) in (0, None)
    assert place.served(entry.kind, entry.key, ARRAYS) in (0, None)
    assert local_files(local_cache()) == []


def test_a_file_of_another_size_at_the_url_than_its_manifest_records_is_not_fetched(built, place):
    entry = built.entry
    index = (entry.path / INDEX_FILE).read_bytes()
    url = place.put(entry.kind, entry.key, {**hostile(entry, {}), INDEX_FILE: index + bytes(1 << 20)})
    ds = gf.open_built(url)
    with pytest.raises(DamagedRemoteEntryError, match=(
            rf"^{url}/{INDEX_FILE} is longer than the {len(index):,} bytes its manifest records: the store holds "
            rf"{len(index) + (1 << 20):,} bytes, and none of them were fetched\. The entry at {url} is damaged")):
        ds[0]
    assert place.served(entry.kind, entry.key, INDEX_FILE) in (0, None)
    assert local_files(local_cache()) == []


# -- row 9: what is rejected is not kept -----------------------------------------------------------------------
def test_an_index_swapping_two_shards_is_rejected_and_not_kept(built, place):
    entry = built.entry
    table = ShardIndex.read(entry.path / INDEX_FILE, "x").table()
    table[:, [3, 4]] = table[:, [4, 3]]
    url = place.put(entry.kind, entry.key, hostile(entry, {INDEX_FILE: npy(table)}))
    ds = gf.open_built(url)
    with pytest.raises(DamagedRemoteEntryError, match=rf"^the test-rows entry at {url}: its shard index "
                                                      r"index.npy does not tile the data .*; its local copy was "
                                                      r"removed\. The entry at"):
        ds[0]
    assert local_files(local_cache()) == []
    assert place.served(entry.kind, entry.key, ARRAYS) in (0, None)


def test_a_shard_damaged_at_the_url_is_rejected_and_not_kept(built, place):
    entry = built.entry
    index = ShardIndex.read(entry.path / INDEX_FILE, "x")
    arrays = bytearray((entry.path / ARRAYS).read_bytes())
    arrays[int(index.offset[2] + index.length[2] // 2)] ^= 0xFF  # shard 2 (rows 200 to 299), its CRC fails
    url = place.put(entry.kind, entry.key, hostile(entry, {ARRAYS: bytes(arrays)}))
    ds = gf.open_built(url, random_access="decode")
    assert ds[5][1]["row"] == 5
    with pytest.raises(DamagedPklzError, match=rf"shard 2 of the test-rows entry at {url} is damaged: fetched twice"):
        ds[250]
    shards = [name for name in local_files(local_cache()) if name.endswith(".shard")]
    assert len(shards) == 1 and f".{int(index.offset[0])}-" in shards[0]  # shard 0's, whole; not shard 2's


def test_a_manifest_failing_its_checks_leaves_nothing_here(built, place):
    entry = built.entry
    files = hostile(entry, {})
    manifest = json.loads(files["manifest.json"])
    manifest["meta"]["n_examples"] = 2000  # without recomputing the hashes
    url = place.put(entry.kind, entry.key, {**files, "manifest.json": json.dumps(manifest).encode()})
    with pytest.raises(DamagedRemoteEntryError, match=rf"^{url}/manifest.json is not a valid manifest: its params or "
                                                      "meta differ from its meta_sha256"):
        gf.open_built(url)
    assert local_files(local_cache()) == []


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    """A local data dir holding the toy dataset (a prepared entry), registered for the module."""
    with prepared_toy(tmp_path_factory.mktemp("toy-local")) as data_dir:
        yield data_dir


@pytest.mark.parametrize("damage", ["hash", "longer"])
def test_a_prepared_entry_failing_its_check_at_the_url_leaves_nothing_here(toy_dir, place, damage):
    [entry] = CacheStore.for_data_dir(toy_dir).ls()
    name = entry.files[0]
    body = (entry.path / name).read_bytes()
    bad = body[:-1] + bytes([body[-1] ^ 1]) if damage == "hash" else body + b"more"
    files = {**{file: (entry.path / file).read_bytes() for file in [*entry.files, "manifest.json"]}, name: bad}
    place.put(entry.kind, entry.key, files)
    what = (rf"{len(body):,} bytes with sha256 [0-9a-f]+, where the manifest records" if damage == "hash" else
            rf"is longer than the {len(body):,} bytes its manifest records: the store holds {len(bad):,} bytes")
    with pytest.raises(DamagedRemoteEntryError, match=what):
        load_toy(data_dir=place.data_dir, download=False)
    assert local_files(local_cache()) == []
    assert place.served(entry.kind, entry.key, name) in ((len(body), None) if damage == "hash" else (0, None))


# -- row 10: a layout no reader can allocate -----------------------------------------------------------------------
HUGE_ROWS = {"dtype": "<f4", "shape": [100000, 100000, 3]}


def with_layout(entry, images: dict) -> dict:
    meta = json.loads(json.dumps(entry.meta))
    meta["layout"]["images"] = images
    return meta


def test_a_layout_of_112_gib_rows_on_disk_is_a_broken_entry_named_with_what_to_do(built, tmp_path):
    data_dir = tmp_path / "data"
    entry_dir = data_dir / "cache" / built.entry.kind / built.key
    entry_dir.mkdir(parents=True)
    for name, body in hostile(built.entry, {}, with_layout(built.entry, HUGE_ROWS)).items():
        (entry_dir / name).write_bytes(body)
    why = ("it declares what no built dataset holds: its layout's array 'images' has rows of float32 of shape "
           "[100000, 100000, 3]: 120,000,000,000 bytes, more than the 1,073,741,824 a row may be")
    with pytest.raises(DamagedManifestError, match=rf"^the entry at {entry_dir} is damaged, its manifest.json fails "
                                                   rf"its checks: {re.escape(why)}\. Remove it \(`glyphforge cache gc "
                                                   rf"--data-dir {data_dir}` removes broken entries\) and build it "
                                                   "again$"):
        gf.open_built(entry_dir)
    result = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert result.returncode == 1 and f"CORRUPT {entry_dir / 'manifest.json'}: {why}" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_layout_of_112_gib_rows_at_a_url_is_refused_before_anything_is_fetched(built, place, tmp_path):
    entry = built.entry
    url = place.put(entry.kind, entry.key, hostile(entry, {}, with_layout(entry, HUGE_ROWS)))
    with pytest.raises(DamagedRemoteEntryError, match=rf"^{url}/manifest.json is not a valid manifest: it declares "
                                                      r"what no built dataset holds: its layout's array 'images' has "
                                                      r"rows of float32 of shape \[100000, 100000, 3\]: "
                                                      r"120,000,000,000 bytes"):
        gf.open_built(url)
    result = run_here("glyphforge", "export", f"{entry.kind}/{entry.key}", tmp_path / "out",
                      "--data-dir", place.data_dir)
    assert result.returncode == 1 and "120,000,000,000 bytes, more than the 1,073,741,824 a row" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
    assert place.served(entry.kind, entry.key, INDEX_FILE) in (0, None)
    assert place.served(entry.kind, entry.key, ARRAYS) in (0, None)


@pytest.mark.parametrize("images, n_examples, complaint", [
    ({"dtype": "|u1", "shape": [3, 0]}, None, "has rows of shape [3, 0], not a list of at most 31 positive integers"),
    ({"dtype": "|u1", "shape": [3, -4]}, None, "has rows of shape [3, -4], not a list"),
    ({"dtype": "|u1", "shape": [3, 4.0]}, None, "has rows of shape [3, 4.0], not a list"),
    ({"dtype": "|u1", "shape": [1] * 32}, None, "not a list of at most 31 positive integers"),
    ({"dtype": "|O", "shape": [3, 4]}, None, "has the dtype object, which no built dataset holds"),
    ({"dtype": "<x9", "shape": [3, 4]}, None, "has the dtype '<x9', which is not a numpy dtype"),
    ({"dtype": "|u1", "shape": [3, 4], "extra": 1}, None, "records the array 'images' as"),
    ({"dtype": "|u1", "shape": [3, 4]}, 10**12, "its meta's n_examples (1,000,000,000,000) is not its params' (1030)"),
    ({"dtype": "|u1", "shape": [3000, 4000]}, None, "its data files are"),
], ids=["zero-dim", "negative-dim", "float-dim", "33-dims", "object", "no-dtype", "extra-field", "n_examples",
        "data-too-small"])
def test_a_lying_layout_or_count_is_a_broken_manifest_naming_the_field(built, tmp_path, images, n_examples,
                                                                        complaint):
    meta = with_layout(built.entry, images)
    if n_examples is not None:
        meta["n_examples"] = n_examples
    entry_dir = tmp_path / built.entry.kind / built.key
    entry_dir.mkdir(parents=True)
    for name, body in hostile(built.entry, {}, meta).items():
        (entry_dir / name).write_bytes(body)
    with pytest.raises(DamagedManifestError, match=re.escape(complaint)):
        read_manifest(entry_dir)


def test_a_build_whose_rows_no_reader_would_accept_is_refused_as_it_is_made(tmp_path):
    class EmptyRows(NoiseSpec):
        def make_shard(self, index, rng, n):
            return {"images": np.zeros((n, 3, 0), np.uint8)}

    with pytest.raises(ShardError) as failure:
        build(EmptyRows(n_examples=2, shard_size=2), data_dir=tmp_path, progress=False)
    assert ("ValueError: make_shard(0, rng, 2) returned arrays a built dataset cannot hold: its layout's array "
            "'images' has rows of shape [3, 0], not a list of at most 31 positive integers") in str(failure.value)
    assert CacheStore.for_data_dir(tmp_path).ls() == []


def test_a_whole_read_stops_past_its_limit_on_every_store(any_place, monkeypatch):
    """A manifest (any object read whole) larger than `Backend.whole_limit` is refused once the limit is passed, on
    every store: over HTTP by the body's length, on s3:// and file:// by reading at most one byte past it."""
    from glyphforge.storage import reads
    from glyphforge.storage.backend import Backend

    monkeypatch.setattr(Backend, "whole_limit", 1000)
    url = any_place.put("scenes", "f" * 64, {"manifest.json": b"{" + b" " * 200_000})
    with pytest.raises(reads.RemoteReadError, match=r"more than the 1,000 bytes"):
        reads.read_bytes(Location(f"{url}/manifest.json"), what="a manifest")
    assert reads.read_bytes(Location(f"{url}/manifest.json"), 0, 10) == b"{" + b" " * 9  # ranges are not whole reads
