"""What every destination of a build does the same: the checks after the spec's prepare, on every backend.

A build decides its key (with the own copies it would read) before its prepare runs; a prepare
that leaves other own copies behind is refused after it, before any shard, wherever the entry
goes: the local store (a path or a ``file://`` URL) or a data dir at a URL (``s3://``, ``gs://``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import glyphforge as gf
from glyphforge.builds.making.spec import SourcesChangedError, cache_params
from glyphforge.context import DataContext

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec, made_shards


@dataclass
class OwnCopyAfterPrepare(NoiseSpec):
    """A spec whose prepare leaves an own copy (unverified) in ``raw/`` that was not there when its key was decided."""

    kind: str = "test-own-after-prepare"

    def prepare(self, context: DataContext) -> None:
        raw = Path(context.data_dir, "raw", self.kind)
        raw.mkdir(parents=True, exist_ok=True)
        (raw / "glyphs.bin").write_bytes(b"placed while the build prepared")

    def own_sources(self, context: DataContext) -> dict[str, Any]:
        placed = Path(context.data_dir, "raw", self.kind, "glyphs.bin")
        return {"glyphs": hashlib.sha256(placed.read_bytes()).hexdigest()} if placed.is_file() else {}


def _data_dir(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "path":
        return str(tmp_path / "data")
    if backend == "file":
        return (tmp_path / "data").as_uri()
    return f"{request.getfixturevalue({'s3': 's3_server', 'gs': 'gcs_server'}[backend]).bucket()}/data"


@pytest.mark.parametrize("backend", ["path", "file", "s3", "gs"])
def test_every_destination_refuses_own_copies_that_changed_while_it_prepared(backend, tmp_path, request,
                                                                             monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "cache"))  # a URL data dir's local one: here
    touched = tmp_path / "made"
    touched.mkdir()
    spec = OwnCopyAfterPrepare(n_examples=20, shard_size=10, touch_dir=str(touched))
    context = DataContext.resolve(data_dir=_data_dir(backend, tmp_path, request), progress=False)
    assert cache_params(spec, context) == cache_params(spec)  # keyed as upstream's: nothing in raw/ yet
    with pytest.raises(SourcesChangedError, match="read other files than those it was keyed by"):
        gf.build(spec, context=context, progress=False)
    assert made_shards(touched) == []  # refused after the prepare, before any shard
