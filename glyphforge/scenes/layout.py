"""The layout part of a scene: where each object goes in the first (or only) frame.

Objects are placed inside the draw window (``draw_shape`` at ``draw_offset``, the whole
image by default), either scattered by rejection sampling (no two ink boxes share more
than ``max_overlap`` of either's area; `glyphforge.pipelines.composite.place`) or on the
distinct cells of a grid (``grid_shape`` cells of the largest object's size plus
``spacing``, the whole grid shifted by a random offset in ``[0, random_offset_range)``
per scene, each object centred in its cell).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Tries per glyph position, and fresh starts of a whole scene, before giving up.
PLACEMENT_ATTEMPTS = 100
PLACEMENT_RESTARTS = 10


@dataclass(frozen=True)
class Layout:
    """Where objects go: scattered (``grid_shape`` None) or on a grid, inside the draw window."""

    image_shape: tuple[int, int]
    draw_shape: tuple[int, int]
    draw_offset: tuple[int, int]
    max_overlap: float
    grid_shape: tuple[int, int] | None = None
    spacing: tuple[int, int] = (0, 0)
    random_offset_range: tuple[int, int] | None = None

    def check(self, largest: tuple[int, int], most: int) -> None:
        """Refuse a window outside the image, or objects of up to ``largest`` (h, w), ``most`` a scene, that cannot fit.

        Raises a ValueError naming the fields and the rule.
        """
        (height, width), (top, left) = self.draw_shape, self.draw_offset
        if top < 0 or left < 0 or top + height > self.image_shape[0] or left + width > self.image_shape[1]:
            raise ValueError(
                f"the draw window draw_shape {self.draw_shape} at draw_offset {self.draw_offset} must lie inside "
                f"image_shape {self.image_shape}: give a smaller draw_shape or draw_offset"
            )
        if largest[0] > height or largest[1] > width:
            raise ValueError(
                f"objects of up to {largest[0]}x{largest[1]} (glyph_shape and glyph_shape_jitter) do not fit in the "
                f"draw window {height}x{width} (draw_shape, or image_shape): use smaller glyphs or a larger window"
            )
        if self.grid_shape is None:
            return
        cells = self.grid_shape[0] * self.grid_shape[1]
        if cells < most:
            raise ValueError(
                f"grid_shape {self.grid_shape} has {cells} cells, fewer than the {most} objects a scene may hold "
                "(max_glyphs, or max_digits plus the operator): every object needs a cell of its own; use a larger "
                "grid_shape or fewer objects"
            )
        extent = self.grid_extent(largest)
        if extent[0] > height or extent[1] > width:
            raise ValueError(
                f"a grid_shape {self.grid_shape} grid of {largest[0]}x{largest[1]} objects with spacing "
                f"{self.spacing} and random_offset_range {self.random_offset_range} spans {extent[0]}x{extent[1]} "
                f"pixels, more than the draw window {height}x{width} (draw_shape, or image_shape): use a smaller "
                "grid, spacing, offset range or glyph_shape, or a larger image_shape"
            )

    def grid_extent(self, largest: tuple[int, int]) -> tuple[int, int]:
        """The pixels a grid of ``largest`` objects covers at its largest random offset."""
        assert self.grid_shape is not None
        reach = (0, 0) if self.random_offset_range is None else self.random_offset_range
        return (
            self.grid_shape[0] * (largest[0] + self.spacing[0]) - self.spacing[0] + max(reach[0] - 1, 0),
            self.grid_shape[1] * (largest[1] + self.spacing[1]) - self.spacing[1] + max(reach[1] - 1, 0),
        )

    def place(
        self, rng: np.random.Generator, starts: np.ndarray, counts: np.ndarray, ink: np.ndarray,
        sizes: np.ndarray, largest: tuple[int, int],
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Return each object's ``(top, left)`` (int64 ``(M, 2)``), its ink box in the image (int64 ``(M, 4)``) and
        the first scene that could not be placed (-1: none).

        ``ink`` is each object's ink box within its array of ``sizes`` (int64 ``(M, 2)``).
        """
        from glyphforge.pipelines import composite  # numba: imported where scenes are made

        positions, boxes = np.zeros((len(ink), 2), np.int64), np.zeros((len(ink), 4), np.int64)
        failed = -1
        if self.grid_shape is None:
            failed = composite.place(
                rng, starts, counts, ink, *self.draw_shape, self.max_overlap, PLACEMENT_ATTEMPTS, PLACEMENT_RESTARTS,
                positions, boxes,
            )
        else:
            positions[:] = self._grid_positions(rng, starts, counts, sizes, largest)
            boxes[:] = np.concatenate([positions, positions], 1) + ink
        offset = np.array(self.draw_offset, np.int64)
        positions += offset
        boxes += np.concatenate([offset, offset])
        return positions, boxes, failed

    def _grid_positions(
        self, rng: np.random.Generator, starts: np.ndarray, counts: np.ndarray, sizes: np.ndarray,
        largest: tuple[int, int],
    ) -> np.ndarray:
        """Each object centred in a distinct random cell of its scene's grid, in draw-window coordinates."""
        assert self.grid_shape is not None
        n, cells = len(counts), self.grid_shape[0] * self.grid_shape[1]
        order = np.argsort(rng.random((n, cells)), axis=1)  # a random permutation of the cells per scene
        scene = np.repeat(np.arange(n), counts)
        cell = order[scene, np.arange(len(scene)) - starts[scene]]
        pitch = np.array(largest, np.int64) + self.spacing
        corners = np.stack([cell // self.grid_shape[1], cell % self.grid_shape[1]], 1) * pitch
        if self.random_offset_range is not None:
            shift = (rng.random((n, 2)) * self.random_offset_range).astype(np.int64)
            corners += shift[scene]
        return corners + (np.array(largest, np.int64) - sizes) // 2
