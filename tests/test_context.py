"""DataContext: resolved once from arguments, a given context and the environment; frozen, picklable, a path."""
from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import pytest

from glyphforge.context import DataContext


def test_explicit_arguments_win_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("GLYPHFORGE_MIRROR", "http://env-mirror/ /srv/mirror")
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    from_env = DataContext.resolve()
    assert from_env.data_dir == tmp_path / "env"
    assert from_env.mirrors == ("http://env-mirror/", "/srv/mirror")
    assert from_env.offline is True and from_env.verify is True and from_env.progress is True
    given = DataContext.resolve(data_dir=tmp_path / "given", mirrors=["/srv/mirror", "/mine"], offline=False,
                                verify=False, progress=False, download=False)
    assert given == DataContext(tmp_path / "given", ("/srv/mirror", "/mine", "http://env-mirror/"), offline=False,
                                verify=False, progress=False, download=False)


def test_a_given_context_is_kept_and_explicit_values_replace_its_fields(tmp_path, monkeypatch):
    monkeypatch.delenv("GLYPHFORGE_MIRROR", raising=False)
    monkeypatch.delenv("GLYPHFORGE_OFFLINE", raising=False)
    base = DataContext.resolve(data_dir=tmp_path, mirrors="/a /b", offline=True)
    assert DataContext.resolve(base) is base
    changed = DataContext.resolve(base, mirrors=["/c"], verify=False)
    assert changed.mirrors == ("/c", "/a", "/b") and changed.verify is False and changed.offline is True
    assert base.verify is True  # frozen: the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.offline = False  # type: ignore[misc]


def test_a_relative_data_dir_is_made_absolute_and_the_context_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = DataContext.resolve(data_dir="data")
    assert context.data_dir == tmp_path / "data"
    assert os.fspath(context) == str(tmp_path / "data") and Path(context) / "raw" == tmp_path / "data" / "raw"
    assert context.raw_dir("mnist") == tmp_path / "data" / "raw" / "mnist"
    assert context.store.root == tmp_path / "data" / "cache"
    assert pickle.loads(pickle.dumps(context)) == context


def test_anything_but_a_context_is_refused_naming_how_to_make_one(tmp_path):
    with pytest.raises(TypeError, match=r"context must be a glyphforge.DataContext, got PosixPath: .*resolve"):
        DataContext.resolve(tmp_path)  # type: ignore[arg-type]
