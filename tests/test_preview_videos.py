"""Previews of videos: a row of frames per video (each frame with its own boxes), or an animation (an animated PNG,
or a GIF) of as many frames as the videos have; from Python and from ``glyphforge preview --animate``."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import glyphforge
from glyphforge.visualize import BOX_COLOURS, CAPTION_HEIGHT, GAP, preview

from support.box_scenes import BoxScenes, scene_datasets  # noqa: F401 (fixture)
from support.cli import run_here

#: 4 videos of 5 frames of 24x36 (zoomed 3x: 128 // 36): cells of 72x108.
STEPS, ZOOM, CELL_H, CELL_W = 5, 3, 72, 108


@pytest.fixture(scope="module")
def videos():
    return BoxScenes(n_frames=STEPS).make_shard(1, np.random.default_rng(4), 4)


def cell(picture: np.ndarray, row: int, column: int) -> np.ndarray:
    top, left = GAP + row * (CELL_H + GAP), GAP + column * (CELL_W + GAP)
    return picture[top:top + CELL_H, left:left + CELL_W]


def zoomed(frame: np.ndarray) -> np.ndarray:
    return np.repeat(np.repeat(frame, ZOOM, 0), ZOOM, 1)


def test_a_still_preview_of_videos_is_a_row_of_frames_per_video_with_each_frame_s_boxes(videos, tmp_path):
    path = preview(videos, path=tmp_path / "videos.png", class_names=BoxScenes.classes, columns=2)
    with Image.open(path) as image:
        assert image.format == "PNG" and getattr(image, "n_frames", 1) == 1
        assert image.size == (STEPS * CELL_W + (STEPS + 1) * GAP, 4 * CELL_H + 5 * GAP)  # columns: the frames
        picture = np.asarray(image)
    outlined = 0
    for i in range(4):
        for t in range(STEPS):
            shown = np.flatnonzero(videos["visible"][i, t])
            if not len(shown):  # nothing drawn over the frame
                np.testing.assert_array_equal(cell(picture, i, t), zoomed(videos["images"][i, t]))
            for slot in shown:
                top, left, _, _ = videos["boxes"][i, t, slot].astype(int) * ZOOM
                assert tuple(cell(picture, i, t)[top, left]) == BOX_COLOURS[slot]  # this frame's box, outlined
                outlined += 1
    assert outlined > 0 and not videos["visible"].all()


@pytest.mark.parametrize(("name", "format"), [("videos.png", "PNG"), ("videos.gif", "GIF")])
def test_an_animated_preview_has_a_frame_per_video_frame(name, format, videos, tmp_path):
    path = preview(videos, path=tmp_path / name, animate=True)
    with Image.open(path) as image:
        assert image.format == format and image.is_animated and image.n_frames == STEPS
        assert image.size == (2 * CELL_W + 3 * GAP, 2 * CELL_H + 3 * GAP + CAPTION_HEIGHT)  # 2x2, the frame number
        for t in range(STEPS):
            image.seek(t)
            if format == "PNG":  # lossless: frame t of every video (the first has no box in frame t)
                picture = np.asarray(image.convert("RGB"))
                for i in (i for i in range(4) if not videos["visible"][i, t].any()):
                    np.testing.assert_array_equal(cell(picture, i // 2, i % 2), zoomed(videos["images"][i, t]))


def test_still_images_are_not_animated(tmp_path):
    still = BoxScenes().make_shard(0, np.random.default_rng(0), 3)
    with pytest.raises(ValueError, match="animate=True plays the frames of videos, and these are still images"):
        preview(still, path=tmp_path / "x.gif", animate=True)
    assert list(tmp_path.iterdir()) == []


def test_the_preview_command_draws_videos_as_rows_or_an_animation(scene_datasets, tmp_path):
    data_dir = scene_datasets["videos"].path.parents[2]
    scene_datasets["scenes"]  # built beside the videos: still scenes for the refusal below
    result = run_here("glyphforge", "preview", "test-box-videos", "--out", tmp_path / "rows.png", "-n", "3",
                      "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    with Image.open(tmp_path / "rows.png") as image:
        assert image.size == (4 * CELL_W + 5 * GAP, 3 * CELL_H + 4 * GAP)  # 3 videos of 4 frames
    result = run_here("glyphforge", "preview", "test-box-videos", "--out", tmp_path / "play.gif", "--animate",
                      "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    with Image.open(tmp_path / "play.gif") as image:
        assert image.format == "GIF" and image.n_frames == 4
    result = run_here("glyphforge", "preview", "test-box-scenes", "--out", tmp_path / "still.gif", "--animate",
                      "--data-dir", data_dir)
    assert result.returncode == 2 and "cannot animate test-box-scenes" in result.stderr
    assert not (tmp_path / "still.gif").exists()
    path = glyphforge.preview(scene_datasets["videos"], n=2, path=tmp_path / "python.png", animate=True)
    with Image.open(path) as image:
        assert image.n_frames == 4
