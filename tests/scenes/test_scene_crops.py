"""Scenes cut into crops (``postprocessing``): pixels, boxes, labels, colours and masks cut with them."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import glyphforge
from glyphforge.scenes.spec import ScatteredGlyphs

BIG = dict(glyphs="font", image_shape=(60, 70), glyph_shape=(14, 14), min_glyphs=2, max_glyphs=8, max_overlap=0.5,
           masks=True, colour_labels=True, colours=("white", "red", "cyan"), background_colours=("navy",))


def _whole(spec: ScatteredGlyphs, seed: int, n_scenes: int) -> dict[str, np.ndarray]:
    """The uncut scenes a crop spec's shard of ``seed`` is cut from (the scenes are drawn first)."""
    whole = dataclasses.replace(spec, postprocessing="", tile_shape=None, n_samples_per_image=1)
    return whole.make_shard(0, np.random.default_rng(seed), n_scenes)


def _expected(scenes: dict[str, np.ndarray], scene: int, corner: tuple[int, int], tile: tuple[int, int]):
    """The crop's boxes, labels, colours and masks, cut from scene ``scene`` object by object."""
    top, left = corner
    boxes, labels, colours, values = [], [], [], {0: 0}
    for slot in range(scenes["n_glyphs"][scene]):
        upper, leftmost, lower, rightmost = scenes["boxes"][scene, slot]
        clipped = [min(max(upper - top, 0), tile[0]), min(max(leftmost - left, 0), tile[1]),
                   min(max(lower - top, 0), tile[0]), min(max(rightmost - left, 0), tile[1])]
        if clipped[2] > clipped[0] and clipped[3] > clipped[1]:
            values[slot + 1] = len(boxes) + 1
            boxes.append(clipped)
            labels.append(scenes["labels"][scene, slot])
            colours.append(scenes["colours"][scene, slot])
        else:
            values[slot + 1] = 0
    window = scenes["masks"][scene, top:top + tile[0], left:left + tile[1]]
    masks = np.vectorize(values.get)(window) if window.size else window
    return np.array(boxes, np.float32).reshape(-1, 4), labels, colours, masks


def _check_crop(crops: dict[str, np.ndarray], i: int, scenes: dict[str, np.ndarray], scene: int,
                corner: tuple[int, int], tile: tuple[int, int]) -> None:
    boxes, labels, colours, masks = _expected(scenes, scene, corner, tile)
    count = crops["n_glyphs"][i]
    assert count == len(boxes)
    np.testing.assert_array_equal(crops["boxes"][i, :count], boxes)
    assert (crops["boxes"][i, count:] == -1).all() and (crops["labels"][i, count:] == -1).all()
    assert list(crops["labels"][i, :count]) == labels and list(crops["colours"][i, :count]) == colours
    assert (crops["colours"][i, count:] == -1).all()
    np.testing.assert_array_equal(crops["masks"][i], masks)


@pytest.mark.parametrize("n", [12, 9])  # whole scenes, and a last scene's surplus crops dropped
def test_tiles_cover_the_scene_row_by_row_with_its_annotations_cut(n):
    spec = ScatteredGlyphs(n, postprocessing="tile", tile_shape=(30, 32), **BIG)  # 2x2 crops, 6 columns dropped
    crops = spec.make_shard(0, np.random.default_rng(5), n)
    scenes = _whole(spec, 5, 3)
    assert crops["images"].shape == (n, 30, 32, 3) and crops["masks"].shape == (n, 30, 32)
    assert set(crops) == set(scenes)
    for i in range(n):
        scene, (row, col) = divmod(i, 4)[0], divmod(i % 4, 2)
        corner = (row * 30, col * 32)
        np.testing.assert_array_equal(crops["images"][i], scenes["images"][scene, corner[0]:corner[0] + 30,
                                                                           corner[1]:corner[1] + 32])
        _check_crop(crops, i, scenes, scene, corner, (30, 32))
    assert crops["n_glyphs"].sum() > 0 and (crops["n_glyphs"] < scenes["n_glyphs"].repeat(4)[:n]).any()


def test_padded_tiles_cover_the_whole_scene_padded_with_black():
    spec = ScatteredGlyphs(6, postprocessing="tile_pad", tile_shape=(40, 40), **BIG)  # 2x2 crops of a 80x80 pad
    crops = spec.make_shard(0, np.random.default_rng(2), 6)
    scenes = _whole(spec, 2, 2)
    padded = np.zeros((2, 80, 80, 3), np.uint8)
    padded[:, :60, :70] = scenes["images"]
    padded_masks = np.zeros((2, 80, 80), np.uint8)
    padded_masks[:, :60, :70] = scenes["masks"]
    for i in range(6):
        scene, (row, col) = i // 4, divmod(i % 4, 2)
        np.testing.assert_array_equal(crops["images"][i], padded[scene, row * 40:row * 40 + 40, col * 40:col * 40 + 40])
        _check_crop(crops, i, {**scenes, "masks": padded_masks}, scene, (row * 40, col * 40), (40, 40))


def test_random_crops_are_windows_of_their_scene_with_its_annotations_cut():
    spec = ScatteredGlyphs(10, postprocessing="random", tile_shape=(24, 28), n_samples_per_image=3,
                           **{**BIG, "background_colours": None, "backgrounds": None})
    crops = spec.make_shard(0, np.random.default_rng(7), 10)
    scenes = _whole(spec, 7, 4)
    found = set()
    for i in range(10):
        scene = i // 3
        windows = np.lib.stride_tricks.sliding_window_view(scenes["images"][scene], (24, 28, 3))[..., 0, :, :, :]
        matches = np.argwhere((windows == crops["images"][i]).all((-3, -2, -1)))
        masks = [tuple(corner) for corner in matches
                 if (scenes["masks"][scene, corner[0]:corner[0] + 24, corner[1]:corner[1] + 28] > 0).sum()
                 == (crops["masks"][i] > 0).sum()]
        errors = []
        for corner in masks:  # black regions can match several windows: one of them is the crop's
            try:
                _check_crop(crops, i, scenes, scene, corner, (24, 28))
                found.add(corner)
                break
            except AssertionError as error:
                errors.append(error)
        else:
            raise AssertionError(f"crop {i} is no window of scene {scene}: {errors}")
    assert len(found) > 3  # the corners are random


def test_video_crops_keep_slots_and_ids_and_hide_objects_outside():
    spec = ScatteredGlyphs(4, glyphs="font", image_shape=(48, 48), max_glyphs=3, n_frames=5, patch_speed=4.0,
                           masks=True, postprocessing="tile", tile_shape=(24, 24))
    crops = spec.make_shard(0, np.random.default_rng(1), 4)
    scenes = _whole(spec, 1, 1)
    assert crops["images"].shape == (4, 5, 24, 24, 3)
    for i, (top, left) in enumerate([(0, 0), (0, 24), (24, 0), (24, 24)]):
        np.testing.assert_array_equal(crops["images"][i], scenes["images"][0, :, top:top + 24, left:left + 24])
        np.testing.assert_array_equal(crops["masks"][i], scenes["masks"][0, :, top:top + 24, left:left + 24])
        for name in ("labels", "ids", "n_glyphs"):
            np.testing.assert_array_equal(crops[name][i], scenes[name][0])
        shifted = np.clip(scenes["boxes"][0] - [top, left, top, left], 0, 24)
        inside = (scenes["visible"][0] == 1) & (shifted[..., 2] > shifted[..., 0]) & (shifted[..., 3] > shifted[..., 1])
        np.testing.assert_array_equal(crops["visible"][i], inside.astype(np.uint8))
        np.testing.assert_array_equal(crops["boxes"][i], np.where(inside[..., None], shifted, -1))


def test_crop_fields_enter_params_only_when_used():
    plain = ScatteredGlyphs(10, glyphs="font").params()
    tiled = ScatteredGlyphs(10, glyphs="font", image_shape=(48, 48), postprocessing="random", tile_shape=[24, 24],
                            n_samples_per_image=2, colour_labels=True).params()
    assert {name: value for name, value in tiled.items() if name not in plain} == {
        "postprocessing": "random", "tile_shape": (24, 24), "n_samples_per_image": 2, "colour_labels": True}


@pytest.mark.parametrize(("options", "message"), [
    (dict(postprocessing="tiles", tile_shape=(8, 8)), "postprocessing must be '' .* or one of tile, tile_pad, random"),
    (dict(postprocessing="tile"), "postprocessing 'tile' cuts scenes into crops of tile_shape: give tile_shape"),
    (dict(tile_shape=(8, 8)), "tile_shape and n_samples_per_image cut scenes into crops: give postprocessing"),
    (dict(postprocessing="tile", tile_shape=(50, 8)), r"tile_shape \(50, 8\) is larger than image_shape \(40, 40\)"),
    (dict(postprocessing="tile", tile_shape=(8, 8), n_samples_per_image=2), "n_samples_per_image counts the crops"),
    (dict(postprocessing="random", tile_shape=(8, 8), n_samples_per_image=0), "n_samples_per_image must be"),
    (dict(colour_labels="yes"), "colour_labels must be True or False"),
])
def test_bad_crops_are_named_before_any_work(options, message):
    with pytest.raises(ValueError, match=message):
        ScatteredGlyphs(10, glyphs="font", image_shape=(40, 40), **options)


@pytest.mark.slow  # worker processes start slowly on a busy machine
def test_crops_build_with_the_same_bytes_on_processes_and_in_one_process(tmp_path):
    spec = ScatteredGlyphs(23, shard_size=7, seed=2, postprocessing="random", tile_shape=(32, 32),
                           n_samples_per_image=3, **BIG)
    local = glyphforge.build(spec, session="local", data_dir=tmp_path / "a", progress=False)
    with glyphforge.open_session("processes", n_workers=2) as session:
        spread = glyphforge.build(spec, session=session, data_dir=tmp_path / "b", progress=False)
    assert local.key == spread.key and len(local) == 23 and local["images"].shape == (23, 32, 32, 3)
    assert set(local.arrays) == {"images", "n_glyphs", "boxes", "labels", "colours", "masks"}
    for name, array in local.arrays.items():
        assert array.tobytes() == spread[name].tobytes(), name
