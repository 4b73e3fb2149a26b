"""Built scenes in a stock torch DataLoader: default collate, two workers, shuffled (issue 34).

Glyph classes are integer codes (``labels``, -1 pads) into the build's table of names, ``ds.classes``:
no string array stops the default collate.
"""
from __future__ import annotations

import json

import numpy as np

import glyphforge
from glyphforge.scenes.spec import ScatteredGlyphs

from support.collate import NEEDS_TORCH, loaded_examples


@NEEDS_TORCH
def test_built_scenes_batch_in_a_stock_dataloader(tmp_path):
    spec = ScatteredGlyphs(90, glyphs="font", characters="B7A", shard_size=40, background_colours=["navy"])
    scenes = glyphforge.build(spec, data_dir=tmp_path, progress=False)
    images, targets = loaded_examples(scenes, batch_size=16)  # every batch checked against scenes[i]
    assert scenes.classes == ["7", "A", "B"] == list(spec.class_names())
    assert images.numpy().dtype == np.uint8 and images.shape == (16, 48, 48, 3)
    assert set(targets) == {"n_glyphs", "boxes", "labels"}
    assert targets["n_glyphs"].numpy().dtype == np.int64 and targets["n_glyphs"].shape == (16,)
    assert targets["boxes"].numpy().dtype == np.float32 and targets["boxes"].shape == (16, 3, 4)
    labels = targets["labels"].numpy()
    assert labels.dtype == np.int64 and labels.shape == (16, 3)
    for codes, count in zip(labels, targets["n_glyphs"].tolist(), strict=True):
        assert (codes[count:] == -1).all()
        assert {scenes.classes[code] for code in codes[:count]} <= {"7", "A", "B"}  # each glyph's name, by its code


def test_an_export_and_a_stream_of_scenes_carry_the_codes_and_the_table(tmp_path):
    scenes = glyphforge.build(ScatteredGlyphs(40, glyphs="font", characters="XY", shard_size=16), data_dir=tmp_path,
                              progress=False)
    exported = scenes.export(tmp_path / "export")
    assert json.loads((exported / "metadata.json").read_text())["metadata"]["class_names"] == scenes.classes
    assert sorted(path.name for path in exported.glob("*.npy")) == ["boxes.npy", "images.npy", "labels.npy",
                                                                     "n_glyphs.npy"]
    np.testing.assert_array_equal(np.load(exported / "labels.npy"), scenes["labels"])
    images, targets = next(iter(scenes.stream(8, seed=0)))
    assert images.shape == (8, 48, 48, 3) and targets["labels"].dtype == np.int64
    assert set(targets["labels"].ravel().tolist()) <= {-1, 0, 1}
