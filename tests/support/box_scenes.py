"""A test-only scene spec with the scene family's arrays (../SCENES_CONTRACT): coloured rectangles, still or moving.

Its objects are rectangles drawn in slot order (a later one over an earlier one), so the masks and boxes agree
by construction: slot ``j``'s mask pixels (``masks == j + 1``) lie inside its box, and its box is the whole
rectangle, clipped to the frame. Objects sit in their own column of the image (neighbours overlap by at
most `OVERLAP` pixels), so every object keeps pixels of its own in every frame it shows in.

Videos move each object by a velocity of its own (leaving the frame is allowed), and show it from an
appearance frame to a disappearance frame; ``visible`` is 1 where it shows and some of it is inside the
frame, and its box is -1 elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from glyphforge.builds import BuiltDataset, build
from glyphforge.scenes.spec import ScatteredGlyphs

#: Pixels a rectangle may reach into its neighbour's column.
OVERLAP = 2


@dataclass
class BoxScenes:
    """Scenes (``n_frames=0``) or videos of up to ``max_objects`` rectangles, of three classes."""

    n_examples: int = 20
    shard_size: int = 6
    seed: int = 0
    image_shape: tuple[int, int] = (24, 36)
    max_objects: int = 3
    n_frames: int = 0
    masks: bool = False
    kind: str = "test-box-scenes"

    classes = ("bar", "block", "dot")

    def params(self) -> dict[str, Any]:
        return {"version": 1, "image_shape": list(self.image_shape), "max_objects": self.max_objects,
                "n_frames": self.n_frames, "masks": self.masks}

    def metadata(self) -> dict[str, Any]:
        return {"class_names": list(self.classes)}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        steps, slots = max(1, self.n_frames), self.max_objects
        height, width = self.image_shape
        images = np.zeros((n, steps, height, width, 3), np.uint8)
        masks = np.zeros((n, steps, height, width), np.uint8)
        boxes = np.full((n, steps, slots, 4), -1, np.float32)
        labels = np.full((n, steps, slots), -1, np.int64)
        ids = np.full((n, steps, slots), -1, np.int64)
        visible = np.zeros((n, steps, slots), np.uint8)
        counts = rng.integers(0 if index % 2 else 1, slots + 1, size=n)  # some scenes without objects
        column = width // slots
        for row in range(n):
            for slot in range(counts[row]):
                label = int(rng.integers(len(self.classes)))
                size = rng.integers(3, [height // 2, column + OVERLAP], endpoint=True)
                start = np.array([rng.integers(0, height - size[0] + 1),
                                  slot * column + rng.integers(0, column + OVERLAP - size[1] + 1)])
                speed = rng.integers(-2, 3, size=2)
                shown = sorted(rng.integers(0, steps + 1, size=2)) if self.n_frames else (0, 1)
                colour = rng.integers(64, 256, size=3)
                labels[row, :, slot], ids[row, :, slot] = label, slot
                for frame in range(shown[0], max(shown[1], shown[0] + 1)):
                    top, left = start + speed * frame if self.n_frames else start
                    box = np.clip([top, left, top + size[0], left + size[1]], 0, [height, width] * 2)
                    if box[2] <= box[0] or box[3] <= box[1]:
                        continue  # wholly outside the frame
                    images[row, frame, box[0]:box[2], box[1]:box[3]] = colour
                    masks[row, frame, box[0]:box[2], box[1]:box[3]] = slot + 1
                    boxes[row, frame, slot], visible[row, frame, slot] = box, 1
        arrays = {"images": images, "n_glyphs": counts.astype(np.int64), "boxes": boxes, "labels": labels}
        if self.n_frames:
            arrays.update(ids=ids, visible=visible)
        else:
            arrays = {name: array[:, 0] if array.ndim > 1 else array for name, array in arrays.items()}
            masks = masks[:, 0]
        if self.masks:
            arrays["masks"] = masks
        return arrays


def frame_objects(targets: dict[str, np.ndarray], frame: int | None = None) -> list[tuple[int, int, list[float]]]:
    """``(slot, label, [top, left, bottom, right])`` of each object shown in one scene of ``ds[i]``'s targets (or
    in its frame ``frame``), in slot order."""
    labels, boxes = targets["labels"], targets["boxes"]
    shown = labels >= 0
    if frame is not None:
        labels, boxes, shown = labels[frame], boxes[frame], targets["visible"][frame] > 0
    return [(int(slot), int(labels[slot]), boxes[slot].tolist()) for slot in np.flatnonzero(shown)]


#: The datasets the detection export tests read, by name: the box scenes still and moving, with and without masks,
#: today's font scenes (no masks), and random crops of larger font scenes (with a ``colours`` array).
SPECS: dict[str, Any] = {
    "scenes": BoxScenes(kind="test-box-scenes"),
    "scenes-masks": BoxScenes(masks=True, kind="test-box-masks"),
    "videos": BoxScenes(n_examples=9, shard_size=4, n_frames=4, kind="test-box-videos"),
    "videos-masks": BoxScenes(n_examples=9, shard_size=4, n_frames=5, masks=True, kind="test-box-video-masks"),
    "font": ScatteredGlyphs(15, image_shape=(24, 24), glyphs="font", characters="AB7", shard_size=6, seed=3,
                            max_glyphs=3, glyph_shape=(8, 8)),
    "font-crops": ScatteredGlyphs(15, image_shape=(40, 40), glyphs="font", characters="AB7", shard_size=6, seed=3,
                                  max_glyphs=5, glyph_shape=(8, 8), colour_labels=True, postprocessing="random",
                                  tile_shape=(24, 24), n_samples_per_image=2),
}
VIDEOS = ("videos", "videos-masks")
MASKS = ("scenes-masks", "videos-masks")


class SceneDatasets:
    """The `SPECS` built in one data dir, each when first asked for (``datasets["videos"]``)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._built: dict[str, BuiltDataset] = {}

    def __getitem__(self, name: str) -> BuiltDataset:
        if name not in self._built:
            self._built[name] = build(SPECS[name], data_dir=self.data_dir, progress=False)
        return self._built[name]


@pytest.fixture(scope="session")
def scene_datasets(tmp_path_factory) -> SceneDatasets:
    return SceneDatasets(tmp_path_factory.mktemp("box-scenes"))
