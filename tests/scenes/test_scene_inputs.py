"""What a scenes spec's prepare says its shards read: the entries a build into a URL publishes for its workers."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from glyphforge.context import DataContext
from glyphforge.scenes.spec import ScatteredGlyphs

SPECS = {
    "omniglot and textures": ScatteredGlyphs(6, glyphs="omniglot", characters=["Balinese,1", "Balinese,2"],
                                             glyph_options={"sets": ["small1"]}, glyph_shape=(20, 20),
                                             backgrounds=["water"]),
    "font and textures": ScatteredGlyphs(6, glyphs="font", characters="AB", backgrounds=["water", "ice"]),
    "font": ScatteredGlyphs(6, glyphs="font", characters="AB"),
}


@pytest.mark.parametrize("name", SPECS)
def test_the_entries_prepare_returns_are_all_the_shards_read(name, shared_data, tmp_path, monkeypatch):
    """A data dir holding only the returned entries makes the same shard as the one prepared."""
    monkeypatch.setenv("GLYPHFORGE_MIRROR", str(shared_data))
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    spec, prepared, inputs_only = SPECS[name], tmp_path / "prepared", tmp_path / "inputs-only"
    entries = spec.prepare(DataContext.resolve(data_dir=prepared, progress=False))
    assert sorted(entry.kind for entry in entries) == sorted(
        {"omniglot and textures": ["omniglot", "omniglot", "backgrounds"], "font and textures": ["backgrounds"],
         "font": []}[name])
    for entry in entries:
        assert entry.path.parent.parent == prepared / "cache"  # in the build's cache
        shutil.copytree(entry.path, inputs_only / "cache" / entry.kind / entry.key)
    made = spec.make_shard(0, np.random.default_rng(4), 6, data_dir=inputs_only)
    expected = spec.make_shard(0, np.random.default_rng(4), 6, data_dir=prepared)
    assert made.keys() == expected.keys() and all(np.array_equal(made[key], expected[key]) for key in made)
