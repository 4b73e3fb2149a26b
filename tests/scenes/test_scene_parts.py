"""The parts a scene is made of: shapes, grid and draw window layouts, distractors, masks, reductions, bad specs."""
from __future__ import annotations

import re

import numpy as np
import pytest

import glyphforge
from glyphforge.scenes.shapes import SHAPE_NAMES, draw_shape
from glyphforge.scenes.spec import ScatteredGlyphs
from glyphforge.scenes.task import parse_reductions


def _shard(spec: ScatteredGlyphs, seed: int = 0) -> dict[str, np.ndarray]:
    """One shard of ``spec`` (font and shapes glyphs: nothing to prepare)."""
    return spec.make_shard(0, np.random.default_rng(seed), spec.n_examples)


def _real(shard: dict[str, np.ndarray]):
    """``(scene, slot, box as ints)`` of every annotated object."""
    for i, k in np.argwhere(shard["labels"] >= 0):
        yield i, k, shard["boxes"][i, k].astype(int)


def _ink_inside_boxes(shard: dict[str, np.ndarray]) -> None:
    """Every lit pixel of a black scene lies in some object's box (no distractors)."""
    for i, image in enumerate(shard["images"]):
        covered = np.zeros(image.shape[:2], bool)
        for top, left, bottom, right in shard["boxes"][i][shard["labels"][i] >= 0].astype(int):
            covered[top:bottom, left:right] = True
        assert not image.any(-1)[~covered].any()


@pytest.mark.parametrize("size", [(5, 5), (12, 9), (31, 40)])
def test_the_nine_shapes_fill_their_box_as_distinct_alpha_masks(size):
    masks = [draw_shape(name, size) for name in SHAPE_NAMES]
    assert len(SHAPE_NAMES) == 9 and "upside_down_triangle" in SHAPE_NAMES
    for name, mask in zip(SHAPE_NAMES, masks, strict=True):
        assert mask.shape == size and mask.dtype == np.uint8 and mask.max() == 255, name
        rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
        spans = rows[-1] - rows[0], cols[-1] - cols[0]
        assert spans[0] >= 0.8 * size[0] - 2 and spans[1] >= 0.8 * size[1] - 2, name  # fills its box
    assert len({mask.tobytes() for mask in masks}) == 9
    hollow, circle = draw_shape("hollow_circle", (31, 31)), draw_shape("circle", (31, 31))
    assert hollow[15, 15] == 0 and circle[15, 15] == 255
    triangle = draw_shape("triangle", (20, 20))
    np.testing.assert_array_equal(triangle[::-1], draw_shape("upside_down_triangle", (20, 20)))


def test_shape_scenes_are_coloured_shapes_labelled_by_their_names():
    spec = ScatteredGlyphs(60, glyphs="shapes", characters="star,x", glyph_shape=(12, 12), colours=["red", "blue"],
                           glyph_shape_jitter=0.3, max_overlap=0.0)
    shard = _shard(spec)
    assert spec.class_names() == ("star", "x")
    colours = set()
    for i, _, (top, left, bottom, right) in _real(shard):
        crop = shard["images"][i, top:bottom, left:right].reshape(-1, 3)
        colours |= {tuple(pixel) for pixel in crop[crop.max(1) == 255]}
    assert colours == {(255, 0, 0), (0, 0, 255)}
    _ink_inside_boxes(shard)
    with pytest.raises(ValueError, match=r"unknown shapes \['hexagon'\]: the shapes are circle, diamond"):
        ScatteredGlyphs(5, glyphs="shapes", characters="hexagon circle")


@pytest.mark.parametrize("offset_range", [None, (4, 3)])
def test_grid_objects_sit_on_distinct_cells_inside_the_draw_window(offset_range):
    window, offset, cell = (30, 40), (5, 3), (12 + 2, 12 + 1)
    # squares: every object's ink sits at the same place in its image, so only the grid's offset moves it in its cell
    spec = ScatteredGlyphs(200, glyphs="shapes", characters="square", image_shape=(40, 48), draw_shape=window,
                           draw_offset=offset,
                           grid_shape=(2, 3), spacing=(2, 1), random_offset_range=offset_range,
                           glyph_shape=(12, 12), min_glyphs=2, max_glyphs=6)
    shard = _shard(spec)
    outside = np.ones((40, 48), bool)
    outside[offset[0] : offset[0] + window[0], offset[1] : offset[1] + window[1]] = False
    shifts = set()
    for i in range(len(shard["images"])):
        boxes = shard["boxes"][i][shard["labels"][i] >= 0].astype(int)
        assert len(boxes) == shard["n_glyphs"][i]
        assert (boxes[:, :2] >= offset).all() and (boxes[:, 2:] <= np.add(offset, window)).all()
        cells = set()
        for top, left, bottom, _ in boxes:
            row, col = (top - offset[0]) // cell[0], (left - offset[1]) // cell[1]
            shift = (top - offset[0]) % cell[0], (left - offset[1]) % cell[1]
            # the object stays in its cell: the cell's 12x12 object area, shifted by the scene's offset
            assert bottom - offset[0] <= row * cell[0] + 12 + (offset_range[0] - 1 if offset_range else 0)
            cells.add((row, col))
            shifts.add(shift)
        assert len(cells) == len(boxes) and all(r < 2 and c < 3 for r, c in cells)
        assert not shard["images"][i][outside].any()
    _ink_inside_boxes(shard)
    assert len(shifts) == (12 if offset_range else 1)


def test_scattered_objects_stay_in_the_draw_window():
    spec = ScatteredGlyphs(100, glyphs="font", image_shape=(40, 40), draw_shape=(20, 24), draw_offset=(15, 10),
                           max_glyphs=3, max_overlap=0.5)
    shard = _shard(spec)
    for _, _, (top, left, bottom, right) in _real(shard):
        assert top >= 15 and left >= 10 and bottom <= 35 and right <= 34
    _ink_inside_boxes(shard)


@pytest.mark.parametrize("layout", [{}, {"grid_shape": (3, 3)}])
def test_masks_agree_with_boxes_and_cover_every_unoccluded_object(layout):
    spec = ScatteredGlyphs(150, glyphs="font", masks=True, max_glyphs=4, max_overlap=0.0, **layout)
    shard = _shard(spec)
    masks = shard["masks"]
    assert masks.shape == (150, 48, 48) and masks.dtype == np.uint8
    np.testing.assert_array_equal(masks > 0, shard["images"].any(-1))  # white on black: the mask is the ink
    for i, k, (top, left, bottom, right) in _real(shard):
        mine = masks[i] == k + 1
        assert mine.any()  # boxes never overlap here: every object shows
        assert not mine[:top].any() and not mine[bottom:].any()
        assert not mine[:, :left].any() and not mine[:, right:].any()
    assert masks.max() <= spec.max_glyphs
    plain = _shard(ScatteredGlyphs(150, glyphs="font", max_glyphs=4, max_overlap=0.0, **layout))
    for name in ("images", "boxes", "labels", "n_glyphs"):  # masks add an array and change nothing else
        assert plain[name].tobytes() == shard[name].tobytes()


def test_later_objects_cover_earlier_ones_in_the_masks():
    spec = ScatteredGlyphs(300, glyphs="shapes", characters="square", masks=True, min_glyphs=2, max_glyphs=2,
                           max_overlap=0.9, image_shape=(20, 20))
    shard = _shard(spec)
    overlapped = 0
    for i in range(300):
        (t0, l0, b0, r0), (t1, l1, b1, r1) = shard["boxes"][i].astype(int)
        second = np.zeros((20, 20), bool)
        second[t1:b1, l1:r1] = True
        square = draw_shape("square", (14, 14)) == 255  # solid where the mask says so
        assert (shard["masks"][i][second] == 2).mean() >= square.mean() - 0.05
        overlapped += bool(second[t0:b0, l0:r0].any())
    assert overlapped > 50


def test_distractors_are_drawn_but_never_annotated():
    common = dict(glyphs="font", max_glyphs=2, max_overlap=0.0, masks=True, image_shape=(40, 40))
    spec = ScatteredGlyphs(100, n_distractors_per_image=6, distractor_shape=(5, 5), **common)
    shard = _shard(spec)
    assert set(shard) == {"images", "n_glyphs", "boxes", "labels", "masks"} and shard["labels"].shape == (100, 2)
    lit_outside = 0
    for i in range(100):
        covered = np.zeros((40, 40), bool)
        for top, left, bottom, right in shard["boxes"][i][shard["labels"][i] >= 0].astype(int):
            covered[top:bottom, left:right] = True
        lit = shard["images"][i].any(-1)
        assert not shard["masks"][i][~covered].any()  # distractors are background in the masks
        lit_outside += int(lit[~covered].sum())
        assert ((shard["masks"][i] > 0) <= lit).all()
    assert lit_outside > 500  # the clutter shows outside the objects' boxes
    for i, k, _ in _real(shard):
        assert (shard["masks"][i] == k + 1).any()  # objects are drawn over the clutter


@pytest.mark.parametrize("reductions", ["A:sum,M:prod,X:max,N:min,C:count", "sum", "count"])
def test_scene_labels_are_the_reduction_of_the_digits_capped(reductions):
    spec = ScatteredGlyphs(300, glyphs="font", characters="0123456789ACMNX", reductions=reductions, min_digits=0,
                           max_digits=4, largest_digit=40, image_shape=(64, 64), max_overlap=0.5)
    shard = _shard(spec)
    names = spec.class_names()
    operators = dict(parse_reductions(reductions))
    functions = {"sum": sum, "prod": np.prod, "max": max, "min": min, "count": len}
    seen = set()
    for labels, count, label in zip(shard["labels"], shard["n_glyphs"], shard["scene_label"], strict=True):
        glyphs = [names[j] for j in labels[:count]]
        assert (labels[count:] == -1).all()
        if "" in operators:
            reduction, digits = operators[""], glyphs
        else:
            reduction, digits = operators[glyphs[0]], glyphs[1:]
            assert all(name.isdigit() for name in digits)
        values = [int(name) for name in digits]
        assert 0 <= len(values) <= 4
        expected = min(int(functions[reduction](values)), 40) if values else 0
        assert label == expected
        seen.add(reduction)
    assert seen == set(operators.values())
    assert shard["labels"].shape[1] == 4 + (0 if "" in operators else 1)
    assert spec.metadata()["scene"] == {"n_frames": 0, "masks": False, "task": operators}


def test_params_grow_only_by_the_parts_not_at_their_defaults():
    plain = ScatteredGlyphs(10, glyphs="font").params()
    grid = ScatteredGlyphs(10, glyphs="font", grid_shape=(2, 2), masks=True).params()
    assert {name: value for name, value in grid.items() if name not in plain} == {"grid_shape": (2, 2), "masks": True}
    assert {name: grid[name] for name in plain} == plain
    assert ScatteredGlyphs(10, glyphs="font", grid_shape=(2, 2), spacing=(0, 0)).params() == ScatteredGlyphs(
        10, glyphs="font", grid_shape=[2, 2]).params()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(grid_shape=(1, 2), max_glyphs=3), r"grid_shape \(1, 2\) has 2 cells, fewer than the 3 objects"),
        (dict(grid_shape=(3, 3), spacing=(2, 2)), r"spans 46x46 pixels, more than the draw window 40x40"),
        (dict(reductions="A:sum", max_digits=9, grid_shape=(3, 3), glyph_shape=(8, 8)),
         r"has 9 cells, fewer than the 10 objects a scene may hold \(max_glyphs, or max_digits plus the operator\)"),
        (dict(characters="0123456789", reductions="A:sum,M:prod"),
         r"reductions names operator classes \['A', 'M'\] that the glyph set does not have"),
        (dict(reductions="A:mean"), "reductions has 'mean', not a reduction: use one of sum, prod, max, min, count"),
        (dict(reductions="sum", min_glyphs=2), "min_glyphs and max_glyphs count the glyphs of scenes without"),
        (dict(min_digits=2), "min_digits, max_digits and largest_digit belong to a label task"),
        (dict(draw_shape=(10, 10)), r"objects of up to 14x14 .* do not fit in the draw window 10x10"),
        (dict(draw_shape=(30, 30), draw_offset=(20, 0)), r"the draw window draw_shape \(30, 30\) at draw_offset"),
        (dict(patch_speed=3.0), "patch_speed, bounce_patches, appearance_prob and disappearance_prob move the objects"),
        (dict(masks="yes"), "masks must be True or False"),
        (dict(n_distractors_per_image=-1), "n_distractors_per_image must be an integer >= 0"),
        (dict(random_offset_range=(0, 2), grid_shape=(2, 2)), "random_offset_range must be an integer >= 1"),
    ],
)
def test_bad_parts_are_named_before_any_work(options, message):
    with pytest.raises(ValueError, match=message):
        ScatteredGlyphs(10, glyphs="font", image_shape=(40, 40), **options)


@pytest.mark.slow  # worker processes start slowly on a busy machine
@pytest.mark.parametrize("n_frames", [0, 4])
def test_every_part_builds_with_the_same_bytes_on_processes_and_in_one_process(tmp_path, n_frames):
    spec = ScatteredGlyphs(90, glyphs="font", characters="0123456789AM", shard_size=40, seed=3, image_shape=(48, 56),
                           grid_shape=(2, 3), random_offset_range=(3, 3), n_distractors_per_image=3, masks=True,
                           reductions="A:sum,M:prod", min_digits=1, max_digits=4, largest_digit=30, n_frames=n_frames,
                           patch_speed=2.5 if n_frames else 2.0, bounce_patches=not n_frames)
    local = glyphforge.build(spec, session="local", data_dir=tmp_path / "a", progress=False)
    with glyphforge.open_session("processes", n_workers=2) as session:
        spread = glyphforge.build(spec, session=session, data_dir=tmp_path / "b", progress=False)
    video = {"ids", "visible"} if n_frames else set()
    assert local.key == spread.key and set(local.arrays) == {
        "images", "n_glyphs", "boxes", "labels", "masks", "scene_label", *video}
    assert local["images"].shape == (90, *([n_frames] if n_frames else []), 48, 56, 3)
    for name, array in local.arrays.items():
        assert array.tobytes() == spread[name].tobytes(), name
    assert local.metadata == spread.metadata and local.metadata["scene"]["task"] == {"A": "sum", "M": "prod"}


@pytest.mark.parametrize(
    ("preset", "arrays", "shape"),
    [
        ("multi_mnist", {"boxes": (8, 2, 4)}, (50, 50)),
        ("visual_arithmetic", {"boxes": (8, 4, 4), "scene_label": (8,)}, (48, 48)),
        ("grid_arithmetic", {"boxes": (8, 4, 4), "scene_label": (8,)}, (48, 48)),
        ("cluttered_mnist", {"boxes": (8, 1, 4)}, (60, 60)),
    ],
)
def test_still_presets_build_offline_with_the_font_and_take_overrides(preset, arrays, shape):
    function = getattr(glyphforge, preset)
    assert re.search(r"\(20\d\d\)|e2crawfo/dps", function.__doc__)  # each cites its source
    spec = function(8, glyphs="font", seed=5)
    shard = _shard(spec)
    assert shard["images"].shape == (8, *shape, 3)
    assert {name: shard[name].shape for name in arrays} == arrays
    assert function(8, glyphs="font", image_shape=(64, 64)).image_shape == (64, 64)
    assert spec.glyphs == "font" and function(8).glyphs != "font"  # the papers' data by default
