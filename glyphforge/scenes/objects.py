"""The objects part of a scene: each object's image (a glyph or a shape) and the unannotated distractors.

Objects are glyphs of a registered dataset (picked from the prepared pool), characters
rendered from Pillow's font, or procedural shapes (`glyphforge.scenes.shapes`), each
resized to its glyph shape (``glyph_shape``, scaled per object by ``glyph_shape_jitter``).
Distractors are random ``distractor_shape`` crops of further objects, scattered in the
draw window and drawn first (under the objects), in no box, label or mask.
"""
from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glyphforge.scenes.sources import SHAPES, GlyphPool

#: Side of the square canvas font glyphs are rendered on (at least; see `font_canvas`).
FONT_CANVAS = 32


@dataclass(frozen=True)
class ObjectImages:
    """Object images padded to the largest: object ``k`` is ``images[k, :heights[k], :widths[k]]`` (its alpha)."""

    images: np.ndarray
    heights: np.ndarray
    widths: np.ndarray

    def sizes(self) -> np.ndarray:
        """int64 ``(M, 2)``: each object's ``(h, w)``."""
        return np.stack([self.heights, self.widths], 1)


def object_images(
    glyphs: str, pool: GlyphPool, labels: np.ndarray, rng: np.random.Generator, glyph_shape: tuple[int, int],
    jitter: float | None, largest: tuple[int, int],
) -> ObjectImages:
    """Pick (or render, or draw) one image per label and resize it to its glyph shape.

    ``largest`` is the largest glyph shape ``jitter`` can give (font glyphs are rendered
    at least that large, then shrunk).
    """
    from glyphforge.pipelines.font_glyphs import render_font_glyphs, shrink_rendered
    from glyphforge.pipelines.resize import resize
    from glyphforge.scenes.shapes import draw_shapes

    total = len(labels)
    shrink: Callable[[np.ndarray, tuple[int, int]], np.ndarray]
    sources = None  # shapes: drawn at each size, no resizing
    if glyphs == SHAPES:
        shrink = functools.partial(draw_shapes, pool.class_names)
    elif pool.images is None or pool.starts is None or pool.counts is None:  # font glyphs: rendered here
        sources = render_font_glyphs(pool.class_names, labels, rng, font_canvas(largest))
        shrink = shrink_rendered  # the same pixels as resize's box, without compiling its kernel
    else:
        picks = pool.starts[labels] + (rng.random(total) * pool.counts[labels]).astype(np.int64)
        sources = pool.images[picks]
        shrink = functools.partial(resize, batch=True)
    if jitter is None:
        heights = np.full(total, glyph_shape[0], np.int64)
        widths = np.full(total, glyph_shape[1], np.int64)
    else:
        scale = rng.uniform(1 - jitter, 1 + jitter, total)
        heights = np.maximum(1, np.rint(glyph_shape[0] * scale)).astype(np.int64)
        widths = np.maximum(1, np.rint(glyph_shape[1] * scale)).astype(np.int64)
    images = np.zeros((total, int(heights.max(initial=1)), int(widths.max(initial=1))), np.uint8)
    for h, w in sorted(set(zip(heights.tolist(), widths.tolist(), strict=True))):
        chosen = np.flatnonzero((heights == h) & (widths == w))
        if sources is None:
            images[chosen, :h, :w] = shrink(labels[chosen], (h, w))
        else:
            images[chosen, :h, :w] = shrink(sources[chosen], (h, w))
    return ObjectImages(images, heights, widths)


def distractor_crops(objects: ObjectImages, shape: tuple[int, int], rng: np.random.Generator) -> ObjectImages:
    """A random ``shape`` crop of each of ``objects`` (the whole object where it is smaller)."""
    sizes = objects.sizes()
    crop = np.minimum(sizes, shape)
    corner = (rng.random(sizes.shape) * (sizes - crop + 1)).astype(np.int64)
    rows = corner[:, :1] + np.arange(shape[0])
    cols = corner[:, 1:] + np.arange(shape[1])
    inside = (np.arange(shape[0])[None, :, None] < crop[:, None, None, 0]) & (
        np.arange(shape[1])[None, None, :] < crop[:, None, None, 1])
    picked = objects.images[
        np.arange(len(sizes))[:, None, None],
        np.minimum(rows, objects.images.shape[1] - 1)[:, :, None],
        np.minimum(cols, objects.images.shape[2] - 1)[:, None, :],
    ]
    return ObjectImages(np.where(inside, picked, 0).astype(np.uint8), crop[:, 0].copy(), crop[:, 1].copy())


def font_canvas(largest_glyph: tuple[int, int]) -> int:
    """Font glyphs are rendered at least as large as the largest glyph they become."""
    return max(FONT_CANVAS, *largest_glyph)


def colours(name: str, value: Any) -> tuple[tuple[int, int, int], ...]:
    """Parse colours (Pillow names, ``"#rrggbb"`` or RGB triples) into RGB triples; a ValueError names a bad one."""
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ValueError(f"{name} is empty; give at least one colour")
    if len(items) == 3 and all(isinstance(item, numbers.Integral) for item in items):
        raise ValueError(f"{name} must be a list of colours; for one RGB colour write [{tuple(items)}]")
    from PIL import ImageColor

    result = []
    for item in items:
        if isinstance(item, str):
            try:
                rgb = ImageColor.getrgb(item)[:3]
            except ValueError:
                raise ValueError(
                    f"{name} has {item!r}, which is not a colour: use a name such as 'white', '#rrggbb' "
                    "or an (r, g, b) triple"
                ) from None
        else:
            rgb = tuple(item)
            if len(rgb) != 3 or any(
                isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= c <= 255 for c in rgb
            ):
                raise ValueError(f"{name} has {item!r}; an RGB colour is three integers in 0..255")
        red, green, blue = (int(c) for c in rgb)
        result.append((red, green, blue))
    return tuple(result)


def background_names(value: Any) -> str | tuple[str, ...] | None:
    """Parse ``backgrounds``: None, ``"all"``, ``"hard"``, or names (a list or one space-separated string)."""
    if value is None or value in ("all", "hard"):
        return value
    names = value.split() if isinstance(value, str) else list(value)
    if not names or any(not isinstance(name, str) for name in names):
        raise ValueError(f"backgrounds must be None, 'all', 'hard' or a list of background names, got {value!r}")
    return tuple(names)

