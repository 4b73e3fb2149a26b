"""A built dataset of `RowSpec` read from each backend, with a decoded copy of its own (tests of decoded copies).

``opener`` (a fixture, parametrized by `BACKENDS`) opens a fresh build of `RowSpec` where the
backend reads it: a path or file:// (a copy of the module's build: the decoded copy is made
beside the entry), or a URL (HTTP, S3 on moto, GCS on the emulator) with a fresh local cache.
Import the fixtures (``built_rows``, ``source``, ``opener``, and ``s3_server``/``gcs_server``) into a test module.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import glyphforge as gf
from glyphforge.builds import BuiltDataset, build
from glyphforge.storage import Location

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec
from support.waits import wait_until

BACKENDS = ["path", "file", "http", "s3", "gs"]


def upload(entry_dir: Path, location: Location) -> None:
    """Put an entry's data files, then its manifest, at ``location`` (as a publisher does)."""
    names = sorted(path.name for path in entry_dir.iterdir() if path.name != "manifest.json")
    for name in [*names, "manifest.json"]:
        location.fs.pipe_file(location.child(name).path, (entry_dir / name).read_bytes())


@pytest.fixture(scope="module")
def built_rows(tmp_path_factory) -> Path:
    """A data dir holding one build of `RowSpec`, never read itself: tests read copies of it (`fresh_build`), servers
    serve it."""
    data_dir = tmp_path_factory.mktemp("rows") / "data"
    build(RowSpec(), data_dir=data_dir, progress=False)
    wait_until(lambda: not list((data_dir / "cache" / RowSpec.kind).glob(".trash-*")),
               "the build's scratch files removed")  # in the background: copies take the build as it stays
    return data_dir


def fresh_build(built_rows: Path, tmp_path: Path) -> BuiltDataset:
    """The build of `RowSpec` in ``tmp_path / "data"``, as a fresh build leaves it (a copy of the module's)."""
    shutil.copytree(built_rows, tmp_path / "data", symlinks=True)
    return gf.open_built(entry_dir(tmp_path / "data"))


def entry_dir(data_dir: Path) -> Path:
    """The folder of the one entry of `RowSpec` in ``data_dir``."""
    [found] = [path for path in (data_dir / "cache" / RowSpec.kind).iterdir() if path.is_dir() and "." not in path.name]
    return found


@pytest.fixture(scope="module", params=BACKENDS)
def source(request, built_rows) -> tuple[str, str | None]:
    """The backend and, for one read at a URL, the entry's URL: served over HTTP or uploaded once for the module
    (readers at a URL keep their decoded copy in their own local cache, which is fresh for every test)."""
    if request.param in ("path", "file"):
        return request.param, None
    entry = entry_dir(built_rows)
    if request.param == "http":
        server = LocalHTTPServer(directory=built_rows)
        server.__enter__()
        request.addfinalizer(lambda: server.__exit__(None, None, None))
        return request.param, server.url(f"cache/{RowSpec.kind}/{entry.name}")
    store = request.getfixturevalue("s3_server" if request.param == "s3" else "gcs_server")
    url = f"{store.bucket()}/data/cache/{RowSpec.kind}/{entry.name}"
    upload(entry, Location(url))
    return request.param, url


@pytest.fixture
def opener(source, built_rows, tmp_path) -> Callable[..., BuiltDataset]:
    """Open a fresh build of `RowSpec` where the backend reads it (a path, or a URL with a fresh local cache)."""
    backend, url = source
    if backend in ("path", "file"):  # the decoded copy is made beside the entry: a copy of the build of its own
        local = fresh_build(built_rows, tmp_path)
        if backend == "path":
            return local.reopened
        url = local.path.as_uri()
    return lambda **options: gf.open_built(url, **options)
