"""Issue 31: one storage interface that every data dir is, chosen from one table of schemes.

The same interface tests run on every backend: a plain path, ``file://``, ``s3://`` on moto,
``gs://`` on the GCS emulator and ``http://`` (the project's Range server: read-only, its writes
refused). Then the table: a registered scheme is used by ``glyphforge.open_built`` and by the
reads (a backend over local folders, and an fsspec protocol glyphforge does not take by itself),
a backend of plain Python (no fsspec filesystem) is enough to publish, list, open, build into and
mirror, and a scheme not in it is still an `UnsupportedURLError`.
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import build
from glyphforge.cache.remote.entries import RemoteCache
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import Resource
from glyphforge.storage import Location
from glyphforge.storage import backends as table
from glyphforge.storage.backend import Backend, ReadOnlyStoreError
from glyphforge.storage.backends import backend_for
from glyphforge.storage.fsspec_backend import FsspecBackend
from glyphforge.storage.local_backend import LocalBackend
from glyphforge.storage.objects import file_sizes, listed_files, upload_file, write_bytes
from glyphforge.storage.reads import (
    RemoteFileMissingError,
    ShortObjectError,
    list_names,
    object_size,
    read_bytes,
)
from glyphforge.urls import MalformedURLError, UnsupportedURLError

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.hashes import bytes_hash
from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

BACKENDS = ["path", "file", "s3", "gs", "http"]
DATA = bytes(range(256)) * 4  # 1,024 bytes


class Store:
    """A data dir on one backend: ``root`` (a path or a URL), ``put`` seeds an object."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.http: LocalHTTPServer | None = None
        if kind == "path":
            self.root = str(tmp_path / "store")
        elif kind == "file":
            self.root = (tmp_path / "store").as_uri()
        elif kind in ("s3", "gs"):
            server = request.getfixturevalue("s3_server" if kind == "s3" else "gcs_server")
            self.root = server.bucket() + "/store"
        else:
            self.http = LocalHTTPServer().start()
            self.root = self.http.url("store")

    def place(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, name: str, data: bytes) -> None:
        if self.http is not None:
            self.http.add(f"store/{name}", data)
        else:
            backend_for(self.place(name)).write(data)

    @property
    def writable(self) -> bool:
        return self.http is None


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path) -> Iterator[Store]:
    where = Store(request.param, tmp_path, request)
    yield where
    if where.http is not None:
        where.http.stop()


def _locations(store: Store, name: str) -> list[Location]:
    """The `Location` of ``name`` when the store is a URL (the module-level functions take one), else nothing."""
    return [Location(store.place(name))] if store.kind != "path" else []


# -- the same interface on every backend ---------------------------------------------------------------------
def test_a_backend_reads_an_object_whole_or_by_range_and_says_its_size(store):
    store.put("a.bin", DATA)
    backend = backend_for(store.place("a.bin"))
    assert isinstance(backend, Backend)
    assert backend.read() == DATA
    assert backend.read(10, 20) == DATA[10:20]
    assert backend.read(1000, 1024) == DATA[1000:]
    assert backend.size() == len(DATA)
    for location in _locations(store, "a.bin"):  # the module-level entry points dispatch to the same backend
        assert read_bytes(location) == DATA and read_bytes(location, 10, 20) == DATA[10:20]
        assert object_size(location) == len(DATA)


def test_a_missing_object_and_a_short_one_fail_alike_on_every_backend(store):
    store.put("a.bin", DATA)
    missing = backend_for(store.place("none.bin"))
    with pytest.raises(RemoteFileMissingError, match=r"could not read .*none\.bin.*there is no such object"):
        missing.read()
    with pytest.raises(RemoteFileMissingError, match=r"could not find the size of .*none\.bin"):
        missing.size()
    with pytest.raises(ShortObjectError, match=r"shorter than expected"):
        backend_for(store.place("a.bin")).read(1000, 1100)


def test_a_writable_backend_writes_uploads_and_lists_and_a_read_only_one_refuses(store, tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(DATA[::-1])
    folder = backend_for(store.root)
    if not store.writable:
        assert folder.read_only and Location(store.root).read_only and folder.local_path is None
        for write in (lambda: backend_for(store.place("w.bin")).write(b"x"),
                      lambda: backend_for(store.place("u.bin")).upload(source),
                      lambda: write_bytes(Location(store.place("w.bin")), b"x"),
                      lambda: upload_file(source, Location(store.place("u.bin")))):
            with pytest.raises(ReadOnlyStoreError, match=r"cannot write http://.*: glyphforge only reads http:// "
                                                         r"URLs\. Write to object storage"):
                write()
        assert store.http is not None and store.http.requests() == 0  # refused before any request
        return
    assert not folder.read_only
    assert folder.names() == [] and folder.files() == {}  # nothing there yet: no error either
    backend_for(store.place("w.bin")).write(DATA)
    backend_for(store.place("w.bin")).write(DATA[:100])  # replaced whole
    backend_for(store.place("u.bin")).upload(source)
    backend_for(store.place("sub/x.bin")).write(b"x")
    assert backend_for(store.place("w.bin")).read() == DATA[:100]
    assert backend_for(store.place("u.bin")).read() == DATA[::-1]
    assert folder.names() == ["sub", "u.bin", "w.bin"]
    assert {name: int(info["size"]) for name, info in folder.files().items()} == {"u.bin": 1024, "w.bin": 100}
    for location in _locations(store, ""):
        assert list_names(location) == ["sub", "u.bin", "w.bin"] and file_sizes(location) == {"u.bin": 1024,
                                                                                              "w.bin": 100}
        assert set(listed_files(location)) == {"u.bin", "w.bin"}
    if store.kind in ("path", "file"):
        assert folder.local_path == tmp_path / "store" and (tmp_path / "store" / "w.bin").read_bytes() == DATA[:100]
        assert not [path for path in (tmp_path / "store").iterdir() if path.name.endswith(".tmp")]
    else:
        assert folder.local_path is None


# -- the table of schemes ------------------------------------------------------------------------------------
@pytest.fixture
def restored_table(monkeypatch):
    """The table of schemes as it was, after the test (a test registers schemes of its own)."""
    monkeypatch.setattr(table, "_BACKENDS", dict(table._BACKENDS))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A local build of 1,030 rows in 11 shards."""
    return build(RowSpec(), data_dir=tmp_path_factory.mktemp("built"), progress=False)


class FolderBackend(LocalBackend):
    """``folder://NAME/path``: ``path`` under the folder registered as ``NAME`` (a store over local folders)."""

    roots: dict[str, Path] = {}

    @classmethod
    def check(cls, url: str) -> str:
        cls.path_of(url)
        return url

    @classmethod
    def path_of(cls, url: str) -> Path:
        name, _, rest = url.split("://", 1)[1].partition("/")
        if name not in cls.roots:
            raise MalformedURLError(f"{url}: no folder is registered as {name!r}")
        return cls.roots[name] / rest


def test_a_registered_backend_over_local_folders_is_read_as_a_local_data_dir(built, restored_table, monkeypatch):
    monkeypatch.setattr(FolderBackend, "roots", {"shelf": built.path.parents[2]})  # the data dir
    gf.register_backend("folder", FolderBackend)
    url = f"folder://shelf/cache/{built.path.parent.name}/{built.path.name}"
    opened = gf.open_built(url)
    assert len(opened) == len(built) and np.array_equal(opened[517][0], built[517][0])
    assert read_bytes(Location(f"{url}/manifest.json")) == (built.path / "manifest.json").read_bytes()
    with pytest.raises(MalformedURLError, match="no folder is registered as 'attic'"):
        gf.open_built("folder://attic/cache/x")


class MemoryBackend(FsspecBackend):
    """``memory://``: fsspec's in-memory filesystem, which glyphforge does not take by itself."""


def test_a_registered_fsspec_protocol_is_read_where_it_lies(built, restored_table):
    with pytest.raises(UnsupportedURLError, match=r"does not support memory:// URLs"):
        gf.open_built(f"memory://gf-tables/cache/{built.path.parent.name}/{built.path.name}")
    gf.register_backend("memory", MemoryBackend)
    url = f"memory://gf-tables/cache/{built.path.parent.name}/{built.path.name}"
    for path in sorted(built.path.iterdir(), key=lambda path: path.name == "manifest.json"):
        write_bytes(Location(f"{url}/{path.name}"), path.read_bytes())
    opened = gf.open_built(url)
    assert len(opened) == len(built)
    assert np.array_equal(opened.take([3, 1029, 640])["images"], built.take([3, 1029, 640])["images"])
    assert list_names(Location(url)) == sorted(path.name for path in built.path.iterdir())


def test_an_unknown_scheme_is_still_an_unsupported_url_error_naming_what_is_taken(restored_table):
    gf.register_backend("folder", FolderBackend)
    with pytest.raises(UnsupportedURLError, match=r"glyphforge does not support nosuch:// URLs; it takes "
                                                  r"s3://BUCKET/prefix, .*file:///abs/path, or a plain path, or "
                                                  r"folder://\.\.\."):
        gf.open_built("nosuch://host/data/cache/x")
    with pytest.raises(TypeError, match="must subclass glyphforge.storage.backend.Backend"):
        gf.register_backend("mine", dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a scheme is two or more letters"):
        gf.register_backend("m", FolderBackend)


class DictBackend(Backend):
    """``dict://NAME/path``: objects in a dict of this process, by URL; no fsspec filesystem anywhere."""

    objects: dict[str, bytes] = {}

    def _get(self) -> bytes:
        try:
            return self.objects[self.url]
        except KeyError:
            raise FileNotFoundError(self.url) from None

    def _below(self) -> dict[str, bytes]:
        return {url[len(self.url) + 1:]: data for url, data in self.objects.items() if url.startswith(f"{self.url}/")}

    def read_once(self, start, end, policy):
        return self._get() if start is None else self._get()[start:end]

    def size_once(self, policy):
        return len(self._get())

    def names_once(self):
        return sorted({path.split("/")[0] for path in self._below()})

    def write(self, data):
        self.objects[self.url] = bytes(data)

    def upload(self, source, *, sent=None, **options):
        self.write(source.read_bytes())
        if sent is not None:
            sent(source.stat().st_size)

    def files(self):
        return {path: {"size": len(data)} for path, data in self._below().items() if "/" not in path}

    def sizes_below(self):
        return {path: len(data) for path, data in self._below().items()}

    def read_whole(self):
        return self._get()

    def open_read(self, block_size):
        return io.BytesIO(self._get())

    def remove(self, names):
        for name in names:
            del self.objects[f"{self.url}/{name}"]


def test_a_registered_backend_need_not_be_an_fsspec_filesystem(built, restored_table, monkeypatch, tmp_path):
    """Publishing, listing, opening, building into and mirroring through a backend of plain Python: nothing outside
    the backends calls fsspec."""
    monkeypatch.setattr(DictBackend, "objects", {})
    gf.register_backend("dict", DictBackend)
    data_dir = built.path.parents[2]
    gf.publish(built.path.name, "dict://shelf/data", data_dir=data_dir, progress=False)
    [entry] = RemoteCache(Location("dict://shelf/data")).ls()
    assert (entry.kind, entry.key) == (built.path.parent.name, built.path.name)
    opened = gf.find_built(built.path.name, "dict://shelf/data", cache_dir=tmp_path / "cache")
    assert np.array_equal(opened.take([3, 1029, 640])["images"], built.take([3, 1029, 640])["images"])
    made = build(RowSpec(), data_dir="dict://shelf/built", progress=False)
    assert np.array_equal(made.take([3, 1029])["images"], built.take([3, 1029])["images"])
    assert not [url for url in DictBackend.objects if ".work" in url]  # the build's records removed once done
    write_bytes(Location("dict://mirror/ds/f.bin"), DATA)
    resource = Resource("ds", "f.bin", "https://nowhere.invalid/f.bin", bytes_hash(DATA, "sha256"), len(DATA))
    assert fetch(resource, tmp_path / "raw", mirrors=["dict://mirror"], progress=False).read_bytes() == DATA
