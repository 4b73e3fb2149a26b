"""What every destination of a build does the same: the checks after the spec's prepare, on every backend.

A build decides its key (with the own copies it would read) before its prepare runs; a prepare
that leaves other own copies behind is refused after it, before any shard, wherever the entry
goes: the local store (a path or a ``file://`` URL) or a data dir at a URL (``s3://``, ``gs://``).
What its shards read, a prepare returns (cache entries, or None): anything else is refused the same
way, and no destination watches the prepare with a process-wide hook.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import glyphforge as gf
from glyphforge.builds.making.spec import SourcesChangedError, cache_params
from glyphforge.context import DataContext

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec, TableSpec, made_shards

TESTS_DIR = Path(__file__).resolve().parents[2]
#: A child process imports the support modules and this glyphforge (not an installed one).
CHILD_PATH = os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])
#: A build in a child process whose first audit hook records the modules that add another one after it.
HOOKS_CHILD = """
import sys
adders = []
sys.addaudithook(lambda event, args: event == "sys.addaudithook" and adders.append(sys._getframe(1).f_globals.get(
    "__name__", "?")))
import glyphforge as gf
from support.specs import TableSpec
built = gf.build(TableSpec(n_examples=20, shard_size=10), data_dir=sys.argv[1], session="local", progress=False)
assert len(built) == 20
print("hooks added by:", sorted({name for name in adders if name.partition(".")[0] == "glyphforge"}))
"""


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


@dataclass
class PrepareReturnsPaths(TableSpec):
    """A spec whose prepare returns the paths of the entries its shards read, not the entries."""

    kind: str = "test-prepare-returns-paths"

    def prepare(self, context: DataContext) -> Any:
        return [entry.path for entry in super().prepare(context)]


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


@pytest.mark.parametrize("backend", ["path", "file", "s3", "gs"])
def test_every_destination_refuses_a_prepare_that_returns_other_than_cache_entries(backend, tmp_path, request,
                                                                                  monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "cache"))
    touched = tmp_path / "made"
    touched.mkdir()
    spec = PrepareReturnsPaths(n_examples=20, shard_size=10, touch_dir=str(touched))
    context = DataContext.resolve(data_dir=_data_dir(backend, tmp_path, request), progress=False)
    with pytest.raises(TypeError, match=r"^PrepareReturnsPaths.prepare must return None or a list of the cache "
                                        r"entries \(glyphforge.cache.Entry\) its shards read; it returned \[Posix"):
        gf.build(spec, context=context, progress=False)
    assert made_shards(touched) == []  # refused after the prepare, before any shard


@pytest.mark.parametrize("backend", ["path", "file", "s3", "gs"])
def test_no_destination_adds_an_audit_hook_to_the_process(backend, tmp_path, request):
    """A build learns what its workers read from its spec (`TableSpec.prepare` returns it): it installs no
    process-wide hook, which no one could remove (``sys.addaudithook`` is for the process's life). Hooks of
    other libraries are theirs (filelock adds one on Python 3.12 and newer)."""
    data_dir = _data_dir(backend, tmp_path, request)  # first: a store's fixture puts its credentials in os.environ
    environment = {**os.environ, "PYTHONPATH": CHILD_PATH, "GLYPHFORGE_CACHE_DIR": str(tmp_path / "cache")}
    child = subprocess.run([sys.executable, "-c", HOOKS_CHILD, data_dir], env=environment, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines()[-1] == "hooks added by: []"
