"""Procedural shapes, the objects of ``glyphs="shapes"``: nine outlines drawn at any size as alpha masks.

Each shape is a test on the centres of a pixel's 4x4 sub-samples in coordinates
``u`` (across) and ``v`` (down), both in ``[-1, 1]`` over the mask; the mask is 255
times the fraction of sub-samples inside (anti-aliased edges, a solid 255 inside).
The class names are the shape names (`SHAPE_NAMES`, sorted).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Sub-samples per pixel side.
SUPERSAMPLE = 4
#: Half the thickness of the bars of ``plus`` and ``x`` and of the ring of ``hollow_circle``.
STROKE = 0.22


def _star(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A five-pointed star, point up: inside when the radius is below the star's outline at that angle."""
    angle = np.mod(np.arctan2(u, -v), 2 * np.pi / 5) - np.pi / 5  # 0 midway between two points
    inner = 0.45  # the radius of the notches, as a fraction of the points' radius 1
    # the outline between a point (angle +-pi/5 from the notch, radius 1) and the notch is a straight edge
    notch, point = np.array([inner, 0.0]), np.array([np.cos(np.pi / 5), np.sin(np.pi / 5)])
    normal = np.array([point[1] - notch[1], -(point[0] - notch[0])])
    direction_x, direction_y = np.cos(angle), np.abs(np.sin(angle))
    reach = (normal @ notch) / (normal[0] * direction_x + normal[1] * direction_y)
    return np.hypot(u, v) <= reach


SHAPES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "circle": lambda u, v: u * u + v * v <= 1,
    "diamond": lambda u, v: np.abs(u) + np.abs(v) <= 1,
    "hollow_circle": lambda u, v: np.abs(np.hypot(u, v) - (1 - STROKE)) <= STROKE,
    "plus": lambda u, v: (np.abs(u) <= STROKE) | (np.abs(v) <= STROKE),
    "square": lambda u, v: (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85),
    "star": _star,
    "triangle": lambda u, v: np.abs(u) <= (v + 1) / 2,
    "upside_down_triangle": lambda u, v: np.abs(u) <= (1 - v) / 2,
    "x": lambda u, v: (np.abs(u - v) <= STROKE * np.sqrt(2)) | (np.abs(u + v) <= STROKE * np.sqrt(2)),
}
SHAPE_NAMES = tuple(sorted(SHAPES))


def draw_shape(name: str, shape: tuple[int, int]) -> np.ndarray:
    """Return the uint8 ``(h, w)`` alpha mask of shape ``name`` filling a ``shape`` box (0 outside, 255 inside)."""
    height, width = shape
    v = (np.arange(height * SUPERSAMPLE) + 0.5) / (height * SUPERSAMPLE) * 2 - 1
    u = (np.arange(width * SUPERSAMPLE) + 0.5) / (width * SUPERSAMPLE) * 2 - 1
    inside = SHAPES[name](u[None, :], v[:, None])
    coverage = inside.reshape(height, SUPERSAMPLE, width, SUPERSAMPLE).mean((1, 3))
    return np.rint(coverage * 255).astype(np.uint8)


def draw_shapes(class_names: tuple[str, ...], labels: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Return uint8 ``(len(labels), h, w)``: the mask of shape ``class_names[label]`` for each label."""
    masks = np.stack([draw_shape(name, shape) for name in class_names])
    return masks[labels]


def check_shape_names(names: tuple[str, ...]) -> None:
    """Refuse names that are not shapes (a ValueError naming the known ones)."""
    unknown = sorted(set(names) - set(SHAPE_NAMES))
    if unknown:
        raise ValueError(f"unknown shapes {unknown}: the shapes are {', '.join(SHAPE_NAMES)}")
