"""Mirrors in object storage (issue #25): ``--mirror s3://bucket/mirror`` serves ``<base>/<dataset>/<filename>``.

A real S3 server on 127.0.0.1 (moto) holds the mirrors; the origin is the project's HTTP
server, which counts requests, so a test sees that a mirror hit never reaches it.
"""
from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from glyphforge import cli
from glyphforge.cache import CacheStore
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.mnist import MNIST
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import DownloadError, HashMismatchError, Resource

from support.cli import run
from support.hashes import bytes_hash
from support.http_server import http_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

DATA = random.Random(25).randbytes(300_000)


def resource(server) -> Resource:
    """``ds/f.bin``, whose origin is ``server`` (it serves DATA there)."""
    server.add("origin/f.bin", DATA)
    return Resource("ds", "f.bin", server.url("origin/f.bin"), bytes_hash(DATA, "sha256"), size=len(DATA))


def mirror(s3_server, files: dict[str, bytes]) -> str:
    """A new bucket's ``mirror`` folder holding ``files`` (``{"ds/f.bin": bytes}``); its URL."""
    base = s3_server.bucket() + "/mirror"
    fs = s3_server.fs()
    for name, data in files.items():
        fs.pipe_file(f"{base}/{name}", data)
    return base


def source_recorded(path) -> str:
    """Where the download record beside ``path`` says it came from."""
    return json.loads(path.with_name(f".{path.name}.record").read_text())["source"]


def test_an_s3_mirror_serves_the_file_and_the_origin_gets_no_request(s3_server, http_server, tmp_path):
    base = mirror(s3_server, {"ds/f.bin": DATA})
    path = fetch(resource(http_server), tmp_path, mirrors=[base], progress=False)
    assert path.read_bytes() == DATA
    assert http_server.requests() == 0
    assert source_recorded(path) == f"{base}/ds/f.bin"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".f.bin.lock", ".f.bin.record", "f.bin"]  # no .part


def test_a_mirror_without_the_file_falls_through_to_the_next_source(s3_server, http_server, monkeypatch, tmp_path):
    empty, full = mirror(s3_server, {}), mirror(s3_server, {"ds/f.bin": DATA})
    monkeypatch.setenv("GLYPHFORGE_MIRROR", full)
    path = fetch(resource(http_server), tmp_path / "a", mirrors=[empty], progress=False)
    assert source_recorded(path) == f"{full}/ds/f.bin" and http_server.requests() == 0
    monkeypatch.delenv("GLYPHFORGE_MIRROR")
    path = fetch(resource(http_server), tmp_path / "b", mirrors=[empty], progress=False)
    assert path.read_bytes() == DATA and source_recorded(path) == http_server.url("origin/f.bin")
    assert http_server.requests("origin/f.bin") == 1


def test_wrong_content_on_an_s3_mirror_is_rejected_and_named(s3_server, http_server, tmp_path):
    base = mirror(s3_server, {"ds/f.bin": DATA[::-1]})
    res = resource(http_server)
    http_server.fail("origin/f.bin", 404, times=None)
    with pytest.raises(HashMismatchError) as raised:
        fetch(res, tmp_path, mirrors=[base], progress=False)
    assert raised.value.url == f"{base}/ds/f.bin"
    assert f"  - {base}/ds/f.bin: wrong content: expected {res.hash}, got " in str(raised.value)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_an_s3_mirror_is_the_network_offline(s3_server, http_server, tmp_path):
    base = mirror(s3_server, {"ds/f.bin": DATA})
    with pytest.raises(DownloadError) as raised:
        fetch(resource(http_server), tmp_path, mirrors=[base], offline=True, progress=False)
    assert "HTTP and object storage (s3://, gs://) mirrors are the network." in str(raised.value)
    assert raised.value.mirrors == () and http_server.requests() == 0
    assert not (tmp_path / "f.bin").exists()


def test_prepare_data_mnist_from_an_s3_mirror_never_asks_the_origin(s3_server, http_server, monkeypatch, tmp_path):
    files = write_synthetic_mnist(tmp_path / "files", (60, 20), seed=2)
    upstream = DECLARATIONS["mnist"]
    resources = {name: dataclasses.replace(res, url=http_server.url(f"origin/{name}"), more_urls=(),
                                           hash=f"md5:{files.md5[name]}", size=files.size[name])
                 for name, res in upstream.resources.items()}
    configs = {name: dataclasses.replace(config, n_images=(60, 20)) for name, config in upstream.configs.items()}
    monkeypatch.setitem(DECLARATIONS, "mnist", dataclasses.replace(upstream, resources=resources, configs=configs))
    base = mirror(s3_server, {f"mnist/{name}": files.data(name) for name in ALL_FILES})
    data_dir = tmp_path / "data"
    assert cli.prepare_data_main(["mnist", "--mirror", base, "--data-dir", str(data_dir), "--no-warmup", "-q"]) == 0
    assert http_server.requests() == 0
    assert {source_recorded(data_dir / "raw" / "mnist" / name) for name in ALL_FILES} == {
        f"{base}/mnist/{name}" for name in ALL_FILES}
    dataset = MNIST(classes=["3"], subset="test", data_dir=data_dir, download=False)
    assert np.array_equal(dataset.images, files.class_images(3, "test"))


@pytest.mark.slow
def test_the_prepare_data_command_takes_an_s3_mirror(s3_server, shared_data, tmp_path):
    names = ["water.jpg", "ice.jpg"]
    base = mirror(s3_server, {f"backgrounds/{name}": (shared_data / "backgrounds" / name).read_bytes()
                              for name in names})
    done = run("prepare-data", "backgrounds", "--backgrounds", "water", "ice", "--mirror", base, "--data-dir",
               tmp_path, "--no-warmup", "-q")
    assert done.returncode == 0, done.stderr
    [entry] = CacheStore.for_data_dir(tmp_path).ls()
    assert sorted(entry.meta["backgrounds"]) == ["ice", "water"]
    assert [source_recorded(tmp_path / "raw" / "backgrounds" / name) for name in names] == [
        f"{base}/backgrounds/{name}" for name in names]
