"""Videos (the motion part): per-frame boxes, ids, visibility and masks, speeds and bounces, and 5-D reads."""
from __future__ import annotations

import numpy as np
import pytest

import glyphforge
from glyphforge.scenes.spec import ScatteredGlyphs


def _shard(spec: ScatteredGlyphs, seed: int = 0) -> dict[str, np.ndarray]:
    return spec.make_shard(0, np.random.default_rng(seed), spec.n_examples)


def _video(**options) -> tuple[ScatteredGlyphs, dict[str, np.ndarray]]:
    fields = dict(glyphs="font", image_shape=(32, 40), glyph_shape=(10, 10), max_glyphs=3, n_frames=8,
                  patch_speed=3.0, max_overlap=0.0)
    spec = ScatteredGlyphs(60, **{**fields, **options})
    return spec, _shard(spec)


def test_video_arrays_have_a_frame_axis_and_stable_ids_and_labels():
    spec, shard = _video(masks=True)
    assert shard["images"].shape == (60, 8, 32, 40, 3) and shard["masks"].shape == (60, 8, 32, 40)
    assert shard["boxes"].shape == (60, 8, 3, 4) and shard["boxes"].dtype == np.float32
    for name in ("labels", "ids"):
        assert shard[name].shape == (60, 8, 3) and shard[name].dtype == np.int64
    assert shard["visible"].shape == (60, 8, 3) and shard["visible"].dtype == np.uint8
    real = np.arange(3) < shard["n_glyphs"][:, None]
    ids = np.where(real, np.arange(3), -1)
    np.testing.assert_array_equal(shard["ids"], np.repeat(ids[:, None], 8, 1))  # the slot, in every frame
    assert (shard["labels"] == shard["labels"][:, :1]).all() and ((shard["labels"] >= 0) == real[:, None]).all()
    assert spec.metadata()["scene"] == {"n_frames": 8, "masks": True, "task": None}


def _corners(shard, i, j):
    return shard["boxes"][i, :, j, :2].astype(float)


def test_bouncing_objects_keep_their_speed_stay_inside_and_reflect_at_the_walls():
    spec, shard = _video(n_frames=12, patch_speed=4.0)
    reflections = 0
    for i in range(60):
        for j in range(shard["n_glyphs"][i]):
            boxes = shard["boxes"][i, :, j].astype(int)
            assert shard["visible"][i, :, j].all()  # a bouncing object never leaves
            sizes = boxes[:, 2:] - boxes[:, :2]
            assert (sizes == sizes[0]).all() and (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= (32, 40)).all()
            steps = np.diff(boxes[:, :2], axis=0)
            assert (np.hypot(*steps.T) <= 4.0 + 1.5).all()  # the speed, to rounding
            for t in range(1, len(steps)):
                for axis, limit in ((0, 32), (1, 40)):
                    before, after = steps[t - 1, axis], steps[t, axis]
                    if before * after < 0 and min(abs(before), abs(after)) > 1:
                        # the motion along an axis turns only at a wall
                        near = min(boxes[t, axis], limit - boxes[t, axis + 2])
                        assert near <= 4 + 1, (i, j, t, boxes[t])
                        reflections += 1
    assert reflections > 20


def test_objects_leave_the_frame_when_not_bouncing_and_boxes_clip():
    spec, shard = _video(bounce_patches=False, patch_speed=5.0, n_frames=12, masks=True)
    left_the_frame = 0
    for i in range(60):
        for j in range(shard["n_glyphs"][i]):
            boxes, visible = shard["boxes"][i, :, j], shard["visible"][i, :, j]
            assert visible[0] == 1 and (boxes[visible == 0] == -1).all()
            shown = boxes[visible == 1]
            assert (shown[:, :2] >= 0).all() and (shown[:, 2] <= 32).all() and (shown[:, 3] <= 40).all()
            assert (shown[:, 2] > shown[:, 0]).all() and (shown[:, 3] > shown[:, 1]).all()
            size = boxes[0, 2:] - boxes[0, :2]
            whole = [t for t in range(12) if visible[t] and ((boxes[t, 2:] - boxes[t, :2]) == size).all()
                     and boxes[t, 0] > 0 and boxes[t, 1] > 0 and boxes[t, 2] < 32 and boxes[t, 3] < 40]
            for t in whole:  # a straight line at the speed: t frames from the start, t * speed away (to rounding)
                assert abs(np.hypot(*(boxes[t, :2] - boxes[0, :2])) - 5.0 * t) <= 1.5
            gone = np.flatnonzero(visible == 0)
            if len(gone):
                left_the_frame += 1
                assert not visible[gone[0]:].any()  # gone for good: it flies on
    assert left_the_frame > 30
    lit = shard["images"].any(-1)
    np.testing.assert_array_equal(shard["masks"] > 0, lit)  # white on black, no distractors: masks are the ink


def test_every_frame_shows_only_its_visible_objects_inside_their_boxes():
    spec, shard = _video(appearance_prob=0.4, disappearance_prob=0.2, n_frames=10, masks=True)
    for i in range(60):
        for t in range(10):
            covered = np.zeros((32, 40), bool)
            for j in np.flatnonzero(shard["visible"][i, t]):
                top, left, bottom, right = shard["boxes"][i, t, j].astype(int)
                covered[top:bottom, left:right] = True
                mine = shard["masks"][i, t] == j + 1
                assert mine.any() and not mine[~covered].any()
            assert not shard["images"][i, t].any(-1)[~covered].any()
    real = np.arange(3) < shard["n_glyphs"][:, None]
    per_object = shard["visible"].transpose(0, 2, 1)[real]  # (objects, frames)
    changes = np.diff(np.concatenate([np.zeros((len(per_object), 1)), per_object, np.zeros((len(per_object), 1))], 1))
    assert ((changes != 0).sum(1) <= 2).all()  # each object shows in one unbroken run of frames (or never)
    assert 0 < per_object[:, 0].mean() < 0.7 and per_object[:, -1].mean() < per_object.max(1).mean()


def test_moving_mnist_with_font_glyphs_builds_offline(tmp_path):
    spec = glyphforge.moving_mnist(12, glyphs="font", seed=4)
    assert (spec.image_shape, spec.n_frames, spec.glyph_shape, spec.max_glyphs) == ((64, 64), 20, (28, 28), 2)
    shard = _shard(spec)
    assert shard["images"].shape == (12, 20, 64, 64, 3) and (shard["n_glyphs"] == 2).all()
    assert (shard["ids"] == [0, 1]).all() and shard["visible"].all()


def test_video_datasets_read_by_index_take_and_resumed_streams(tmp_path):
    spec = ScatteredGlyphs(40, glyphs="font", image_shape=(24, 24), glyph_shape=(8, 8), n_frames=5, patch_speed=2.0,
                           shard_size=16, masks=True, n_distractors_per_image=2)
    local = glyphforge.build(spec, session="local", data_dir=tmp_path, progress=False)  # processes: test_scene_parts
    image, targets = local[7]
    assert image.shape == (5, 24, 24, 3)
    assert targets["boxes"].shape == (5, 3, 4) and targets["masks"].shape == (5, 24, 24)
    np.testing.assert_array_equal(image, local["images"][7])
    taken = local.take([3, 30, 17])
    np.testing.assert_array_equal(taken["images"], local["images"][[3, 30, 17]])
    whole = [(images.copy(), targets["ids"].copy()) for images, targets in local.stream(8, shuffle=True, seed=2)]
    stream = local.stream(8, shuffle=True, seed=2)
    iterator = iter(stream)
    next(iterator), next(iterator)
    state = stream.state_dict()
    rest = list(local.stream(8, shuffle=True, seed=2, resume=state))
    assert len(rest) == len(whole) - 2
    for (images, ids), (again, targets) in zip(whole[2:], rest, strict=True):
        assert again.shape == (8, 5, 24, 24, 3)
        np.testing.assert_array_equal(images, again)
        np.testing.assert_array_equal(ids, targets["ids"])


@pytest.mark.parametrize("options", [dict(n_frames=0, patch_speed=3.0), dict(n_frames=4, patch_speed=-1.0),
                                     dict(n_frames=4, patch_speed=100.0)])
def test_bad_motion_is_named_before_any_work(options):
    with pytest.raises(ValueError, match="patch_speed"):
        ScatteredGlyphs(10, glyphs="font", **options)


def test_a_speed_objects_can_neither_bounce_with_nor_leave_by_is_refused():
    with pytest.raises(ValueError, match=r"they can neither bounce \(bounce_patches=True\) nor leave"):
        ScatteredGlyphs(10, glyphs="font", image_shape=(14, 14), n_frames=4, patch_speed=1.0)
    ScatteredGlyphs(10, glyphs="font", image_shape=(14, 14), n_frames=4, patch_speed=1.0, bounce_patches=False)
