"""Objects' colours as labels, and scene labels from the objects' attributes (set of three, "X above Y")."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import glyphforge
from glyphforge.scenes.spec import ScatteredGlyphs

PALETTE = ("red", "blue", "lime")
RGB = np.array([(255, 0, 0), (0, 0, 255), (0, 255, 0)], np.uint8)


def _shard(spec: ScatteredGlyphs, seed: int = 0) -> dict[str, np.ndarray]:
    return spec.make_shard(0, np.random.default_rng(seed), spec.n_examples)


@pytest.mark.parametrize("n_frames", [0, 3])
def test_each_objects_colour_index_is_the_colour_of_its_pixels(n_frames):
    spec = ScatteredGlyphs(40, glyphs="shapes", colours=PALETTE, colour_labels=True, masks=True, max_glyphs=4,
                           glyph_shape=(10, 10), image_shape=(40, 40), n_frames=n_frames)
    shard = _shard(spec)
    images, masks, colours, labels = shard["images"], shard["masks"], shard["colours"], shard["labels"]
    if not n_frames:  # one frame of the same layout
        images, masks, colours, labels = images[:, None], masks[:, None], colours[:, None], labels[:, None]
    assert colours.dtype == np.int64 and ((colours == -1) == (labels == -1)).all()
    seen = 0
    for i, t, slot in np.argwhere(colours >= 0):
        pixels = images[i, t][masks[i, t] == slot + 1]
        solid = pixels[pixels.max(1) == 255]  # where the shape's alpha is whole
        assert (solid == RGB[colours[i, t, slot]]).all()
        seen += len(solid) > 0
    assert seen > 50 and len(np.unique(colours[colours >= 0])) == 3


def test_colour_labels_off_keeps_the_arrays_and_bytes():
    plain_spec = ScatteredGlyphs(5, glyphs="shapes", colours=PALETTE)
    coloured_spec = ScatteredGlyphs(5, glyphs="shapes", colours=PALETTE, colour_labels=True)
    assert coloured_spec.metadata()["colours"] == RGB.tolist() and "colours" not in plain_spec.metadata()
    plain, coloured = _shard(plain_spec), _shard(coloured_spec)
    assert "colours" not in plain and set(coloured) == {*plain, "colours"}
    for name, array in plain.items():
        assert array.tobytes() == coloured[name].tobytes()


def _is_set(cards: list[tuple[int, int, int]]) -> bool:
    return any(all(len({card[k] for card in triple}) in (1, 3) for k in range(3))
               for triple in itertools.combinations(cards, 3))


def test_set_labels_say_whether_some_three_objects_form_a_set():
    # circles, pluses and x's fill their box: its height is the object's size (0.6, 0.8 or 1.0 of 20)
    spec = ScatteredGlyphs(200, glyphs="shapes", characters="circle,plus,x", colours=PALETTE, glyph_shape=(20, 20),
                           image_shape=(90, 90), min_glyphs=3, max_glyphs=5, max_overlap=0.3, colour_labels=True,
                           attribute_task="set")
    shard = _shard(spec)
    assert shard["scene_label"].dtype == np.int64 and set(shard["scene_label"]) == {0, 1}
    assert 60 < shard["scene_label"].sum() < 140
    for i in range(200):
        count = shard["n_glyphs"][i]
        heights = shard["boxes"][i, :count, 2] - shard["boxes"][i, :count, 0]
        assert set(heights) <= {12, 16, 20}
        cards = list(zip(shard["labels"][i, :count], shard["colours"][i, :count], heights, strict=True))
        assert len(set(cards)) == count  # no two objects alike in every attribute
        assert shard["scene_label"][i] == _is_set(cards), i


def test_above_labels_say_whether_the_first_object_is_above_the_second():
    spec = ScatteredGlyphs(200, glyphs="shapes", colours=PALETTE, image_shape=(48, 48), min_glyphs=2, max_glyphs=4,
                           colour_labels=True, attribute_task="above:blue x,red circle")
    shard = _shard(spec)
    names = spec.class_names()
    x, circle = names.index("x"), names.index("circle")
    assert (shard["labels"][:, 0] == x).all() and (shard["colours"][:, 0] == 1).all()
    assert (shard["labels"][:, 1] == circle).all() and (shard["colours"][:, 1] == 0).all()
    others = list(zip(shard["labels"][:, 2:][shard["labels"][:, 2:] >= 0],
                      shard["colours"][:, 2:][shard["labels"][:, 2:] >= 0], strict=True))
    assert others and (x, 1) not in others and (circle, 0) not in others
    centres = shard["boxes"][:, :2, 0] + shard["boxes"][:, :2, 2]
    np.testing.assert_array_equal(shard["scene_label"], (centres[:, 0] < centres[:, 1]).astype(np.int64))
    assert 60 < shard["scene_label"].sum() < 140


def test_attribute_tasks_enter_params_in_one_spelling():
    spec = ScatteredGlyphs(5, glyphs="shapes", colours=PALETTE, min_glyphs=2,
                           attribute_task=" above: blue x , red circle")
    assert spec.params()["attribute_task"] == "above:blue x,red circle" == spec.attribute_task
    assert ScatteredGlyphs(5, glyphs="shapes", min_glyphs=3, attribute_task="set ").params()["attribute_task"] == "set"


@pytest.mark.parametrize(("options", "message"), [
    (dict(attribute_task="set"), r"give it no argument, min_glyphs >= 3 .* min_glyphs 1"),
    (dict(attribute_task="set", min_glyphs=3, max_glyphs=30, characters="circle", colours=PALETTE),
     "max_glyphs <= 9"),
    (dict(attribute_task="set", min_glyphs=3, glyph_shape_jitter=0.2), "leave glyph_shape_jitter None"),
    (dict(attribute_task="above:blue x,red circle"), r"names blue x, but the colours are \[\(255, 255, 255\)\]"),
    (dict(attribute_task="above:red x,red square", colours=PALETTE, characters="x,circle"),
     "names red square, but the colours"),
    (dict(attribute_task="above:red x,blue circle", colours=PALETTE, min_glyphs=1), "give min_glyphs >= 2"),
    (dict(attribute_task="above:red x"), "write two different objects as 'above:COLOUR CLASS,COLOUR CLASS'"),
    (dict(attribute_task="left:red x,blue circle"), "attribute_task must be 'set' or 'above:"),
    (dict(attribute_task="set", reductions="sum"), "give one of them"),
    (dict(attribute_task="set", glyphs="emnist", min_glyphs=3), "use glyphs='shapes' or 'font'"),
])
def test_bad_attribute_tasks_are_named_before_any_work(options, message):
    with pytest.raises(ValueError, match=message):
        ScatteredGlyphs(10, **{"glyphs": "shapes", "image_shape": (60, 60), **options})


@pytest.mark.slow  # worker processes start slowly on a busy machine
@pytest.mark.parametrize("task", ["set", "above:blue x,red circle"])
def test_attribute_tasks_build_with_the_same_bytes_on_processes_and_in_one_process(tmp_path, task):
    spec = ScatteredGlyphs(30, glyphs="shapes", colours=PALETTE, image_shape=(64, 64), glyph_shape=(16, 16),
                           min_glyphs=3, max_glyphs=6, colour_labels=True, attribute_task=task, shard_size=8, seed=4)
    local = glyphforge.build(spec, session="local", data_dir=tmp_path / "a", progress=False)
    with glyphforge.open_session("processes", n_workers=2) as session:
        spread = glyphforge.build(spec, session=session, data_dir=tmp_path / "b", progress=False)
    assert set(local.arrays) == {"images", "n_glyphs", "boxes", "labels", "colours", "scene_label"}
    for name, array in local.arrays.items():
        assert array.tobytes() == spread[name].tobytes(), name
    assert local.metadata["scene"]["task"] == task
