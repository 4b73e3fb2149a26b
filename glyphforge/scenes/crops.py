"""Large scenes cut into crops, their annotations cut with them (dps's ``postprocessing``).

A scene (or video) of ``image_shape`` is made, then cut into crops of ``tile_shape``:
``"tile"`` a grid of crops from the top-left corner, row by row (the rest of the scene past
the last whole crop is dropped), ``"tile_pad"`` the same with the scene padded with black to
a whole number of crops, ``"random"`` ``n_samples_per_image`` crops at uniform random corners.
Each crop is one example: ``n_examples`` (and a shard's size) counts crops, and a shard of ``s``
crops is cut from ``ceil(s / crops_per_scene)`` scenes, the surplus crops of its last scene
dropped, so a shard's bytes depend only on its seed and size.

Boxes are shifted to the crop and clipped to it. In still scenes an object whose box lies
wholly outside the crop leaves the crop's slots (the others keep their order, so ``n_glyphs``,
``labels``, ``colours`` and the ``masks`` values follow); in videos the slots (and ``ids``)
stay, and ``boxes`` are -1 and ``visible`` 0 in the frames where the object is outside the
crop. ``scene_label`` is the whole scene's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The ``postprocessing`` values.
POSTPROCESSING = ("tile", "tile_pad", "random")
#: The arrays with one entry per object slot, after the scene (and frame) axes.
SLOT_ARRAYS = ("labels", "colours", "ids", "visible")


@dataclass(frozen=True)
class Crops:
    """How scenes of ``image_shape`` are cut into ``tile_shape`` crops (module docstring)."""

    postprocessing: str
    tile_shape: tuple[int, int]
    n_samples_per_image: int
    image_shape: tuple[int, int]

    @property
    def grid(self) -> tuple[int, int]:
        """Rows and columns of crops in a tiled scene."""
        rounding = np.ceil if self.postprocessing == "tile_pad" else np.floor
        return (int(rounding(self.image_shape[0] / self.tile_shape[0])),
                int(rounding(self.image_shape[1] / self.tile_shape[1])))

    @property
    def per_scene(self) -> int:
        """The crops cut from each scene."""
        return self.n_samples_per_image if self.postprocessing == "random" else self.grid[0] * self.grid[1]

    def scenes_for(self, n: int) -> int:
        """The scenes ``n`` crops are cut from."""
        return -(-n // self.per_scene)

    def corners(self, rng: np.random.Generator, n_scenes: int) -> np.ndarray:
        """int64 ``(n_scenes * per_scene, 2)``: each crop's top-left corner, scene by scene."""
        if self.postprocessing == "random":
            room = np.array(self.image_shape) - self.tile_shape + 1
            return (rng.random((n_scenes * self.per_scene, 2)) * room).astype(np.int64)
        rows, cols = self.grid
        grid = np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"), -1).reshape(-1, 2)
        return np.tile(grid * np.array(self.tile_shape), (n_scenes, 1)).astype(np.int64)

    def cut(self, made: dict[str, np.ndarray], rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """The first ``n`` crops of the scenes' arrays ``made`` (`glyphforge.scenes.spec.ScatteredGlyphs`'s)."""
        scene = np.repeat(np.arange(len(made["images"])), self.per_scene)[:n]
        corners = self.corners(rng, len(made["images"]))[:n]
        video = made["images"].ndim == 5
        cut = {name: values[scene] for name, values in made.items() if name not in ("images", "masks", "boxes")}
        cut["images"] = self._pixels(made["images"] if video else made["images"][:, None], scene, corners, video)
        boxes = made["boxes"][scene] - np.tile(corners, 2).reshape(n, *[1] * (made["boxes"].ndim - 2), 4)
        boxes = np.clip(boxes, 0, np.tile(self.tile_shape, 2)).astype(np.float32)
        shows = (made["boxes"][scene][..., 0] >= 0) & (boxes[..., 2] > boxes[..., 0]) & (boxes[..., 3] > boxes[..., 1])
        masks = made.get("masks")
        if video:
            cut["boxes"] = np.where(shows[..., None], boxes, np.float32(-1))
            cut["visible"] = (cut["visible"].astype(bool) & shows).astype(np.uint8)
            if masks is not None:
                cut["masks"] = self._pixels(masks, scene, corners, video)
            return cut
        slot = np.cumsum(shows, 1) - 1  # each kept object's slot in the crop
        crop, old = np.nonzero(shows)
        cut["n_glyphs"] = shows.sum(1).astype(np.int64)
        cut["boxes"] = _compact(boxes, crop, old, slot)
        for name in SLOT_ARRAYS:
            if name in cut:
                cut[name] = _compact(cut[name], crop, old, slot)
        if masks is not None:
            values = np.zeros((n, shows.shape[1] + 1), np.uint8)
            values[crop, old + 1] = slot[crop, old] + 1
            pixels = self._pixels(masks[:, None], scene, corners, video)
            offsets = (np.arange(n) * values.shape[1]).reshape(n, 1, 1)
            cut["masks"] = np.take(values.ravel(), pixels + offsets)
        return cut

    def _pixels(self, frames: np.ndarray, scene: np.ndarray, corners: np.ndarray, video: bool) -> np.ndarray:
        """Each crop's pixels of ``frames`` ``(scenes, T, H, W, ...)``, 0 past the scene: ``(n, [T,] h, w, ...)``."""
        if self.postprocessing == "tile_pad":
            grid = np.array(self.grid) * self.tile_shape
            padding = [(0, 0), (0, 0), (0, grid[0] - frames.shape[2]), (0, grid[1] - frames.shape[3])]
            frames = np.pad(frames, padding + [(0, 0)] * (frames.ndim - 4))
        windows = np.lib.stride_tricks.sliding_window_view(frames, self.tile_shape, axis=(2, 3))
        pixels = windows[scene, :, corners[:, 0], corners[:, 1]]  # (n, T, channels..., h, w)
        pixels = np.ascontiguousarray(np.moveaxis(pixels, (-2, -1), (2, 3)))
        return pixels if video else pixels[:, 0]


def _compact(values: np.ndarray, crop: np.ndarray, old: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``values`` ``(n, G, ...)`` with each crop's kept objects moved to its first slots, the rest -1."""
    compacted = np.full_like(values, -1)
    compacted[crop, slot[crop, old]] = values[crop, old]
    return compacted


def check(postprocessing: str, tile_shape: tuple[int, int] | None, n_samples_per_image: int,
          image_shape: tuple[int, int]) -> Crops | None:
    """Check the crop fields (a ValueError naming the field and the rule); return the crops (None: whole scenes)."""
    from glyphforge._checks import check_int, check_shape

    check_int("n_samples_per_image", n_samples_per_image, 1)
    if postprocessing == "":
        if tile_shape is not None or n_samples_per_image != 1:
            raise ValueError("tile_shape and n_samples_per_image cut scenes into crops: give postprocessing 'tile', "
                             "'tile_pad' or 'random' with them, or leave them unset")
        return None
    if postprocessing not in POSTPROCESSING:
        raise ValueError(f"postprocessing must be '' (whole scenes) or one of {', '.join(POSTPROCESSING)}; "
                         f"got {postprocessing!r}")
    if tile_shape is None:
        raise ValueError(f"postprocessing {postprocessing!r} cuts scenes into crops of tile_shape: give tile_shape")
    tile_shape = check_shape(tile_shape, "tile_shape")
    if tile_shape[0] > image_shape[0] or tile_shape[1] > image_shape[1]:
        raise ValueError(f"tile_shape {tile_shape} is larger than image_shape {image_shape}: crops are cut from the "
                         "scene, so give a smaller tile_shape or a larger image_shape")
    if postprocessing != "random" and n_samples_per_image != 1:
        raise ValueError(f"n_samples_per_image counts the crops of postprocessing 'random'; {postprocessing!r} cuts a "
                         "grid of tile_shape crops: leave n_samples_per_image at 1")
    return Crops(postprocessing, tile_shape, n_samples_per_image, image_shape)
