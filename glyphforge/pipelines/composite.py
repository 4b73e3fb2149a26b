"""numba kernels that lay glyphs out in scenes and composite them over backgrounds.

Layouts shared by the kernels:

* glyphs: uint8 ``(M, Hmax, Wmax)``, glyph ``k`` in ``[:heights[k], :widths[k]]``
  (white on black; the intensity is the glyph's alpha);
* scenes: glyphs ``starts[s] : starts[s] + counts[s]`` belong to scene ``s``;
* boxes: int64 ``(top, left, bottom, right)``, bottom/right exclusive;
* textures: one flat uint8 buffer, texture ``t`` being the ``(tex_heights[t],
  tex_widths[t], 3)`` image that starts at ``tex_offsets[t]``.

Callers make every array the kernels fill, and ``min``/``max``/``int`` are written out:
each would be one more function for numba to compile on a machine's first scene
(benchmarks/README.md, "Cold start").
"""
from __future__ import annotations

import numpy as np
from numba import njit

from glyphforge.pipelines import numba_cache

numba_cache.configure()  # before the kernels below set up their caches


@njit(cache=True, inline="always")
def _smaller(a: int, b: int) -> int:
    """``min(a, b)``, which numba would compile as a function of its own."""
    return a if a < b else b


@njit(cache=True, inline="always")
def _larger(a: int, b: int) -> int:
    """``max(a, b)``, which numba would compile as a function of its own."""
    return a if a > b else b


@njit(cache=True, **numba_cache.ENTRY)
def ink_boxes(glyphs: np.ndarray, heights: np.ndarray, widths: np.ndarray, boxes: np.ndarray) -> None:
    """Write into int64 ``boxes`` ``(M, 4)`` each glyph's tight box around its non-zero pixels.

    A glyph without ink gets its whole ``(0, 0, height, width)`` rectangle.
    """
    for k in range(glyphs.shape[0]):
        h, w = heights[k], widths[k]
        top, left, bottom, right = h, w, 0, 0
        for y in range(h):
            for x in range(w):
                if glyphs[k, y, x] != 0:
                    top, bottom = _smaller(top, y), _larger(bottom, y + 1)
                    left, right = _smaller(left, x), _larger(right, x + 1)
        if bottom == 0:
            top, left, bottom, right = 0, 0, h, w
        boxes[k, 0], boxes[k, 1], boxes[k, 2], boxes[k, 3] = top, left, bottom, right


@njit(cache=True, inline="always")
def _too_close(boxes: np.ndarray, a: int, b: int, max_overlap: float) -> bool:
    height = _smaller(boxes[a, 2], boxes[b, 2]) - _larger(boxes[a, 0], boxes[b, 0])
    width = _smaller(boxes[a, 3], boxes[b, 3]) - _larger(boxes[a, 1], boxes[b, 1])
    if height <= 0 or width <= 0:
        return False
    shared = height * width
    area_a = (boxes[a, 2] - boxes[a, 0]) * (boxes[a, 3] - boxes[a, 1])
    area_b = (boxes[b, 2] - boxes[b, 0]) * (boxes[b, 3] - boxes[b, 1])
    return shared > max_overlap * area_a or shared > max_overlap * area_b


#: `place_glyphs`'s answer when ``draws`` ran out before every scene was settled.
OUT_OF_DRAWS = -2


def place(
    rng: np.random.Generator, starts: np.ndarray, counts: np.ndarray, ink: np.ndarray, image_height: int,
    image_width: int, max_overlap: float, attempts: int, restarts: int, positions: np.ndarray, boxes: np.ndarray,
) -> int:
    """`place_glyphs` drawing from ``rng``, which is left as if each number had been drawn from it one at a time.

    The numbers are drawn ahead here (``rng.random(n)`` gives the same doubles as ``n``
    calls of ``rng.random()``), more when they run out; then ``rng`` is set back and
    advanced by those used. (numba can draw from a Generator itself, but that costs
    three compiled functions more on a machine's first scene.) Returns what
    `place_glyphs` returns.
    """
    state = rng.bit_generator.state
    budget = 2 * ink.shape[0] + 64  # plenty when glyphs mostly fit at their first try
    used = np.zeros(1, np.int64)
    while True:
        failed = place_glyphs(rng.random(budget), starts, counts, ink, image_height, image_width, max_overlap,
                              attempts, restarts, positions, boxes, used)
        rng.bit_generator.state = state
        if failed != OUT_OF_DRAWS:
            rng.random(int(used[0]))
            return int(failed)
        budget *= 4


@njit(cache=True, **numba_cache.ENTRY)
def place_glyphs(
    draws: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    ink: np.ndarray,
    image_height: int,
    image_width: int,
    max_overlap: float,
    attempts: int,
    restarts: int,
    positions: np.ndarray,
    boxes: np.ndarray,
    used: np.ndarray,
) -> int:
    """Choose glyph positions by rejection sampling.

    Each glyph's ink box is placed uniformly among the positions that keep it inside
    the image; a position is rejected when the box shares more than ``max_overlap``
    of its own area, or of the other's, with a box already placed in the scene.
    A glyph gets ``attempts`` tries; when they all fail the scene starts over, at
    most ``restarts`` times.

    Parameters
    ----------
    draws
        float64 uniform numbers in ``[0, 1)``, used in order: a position is
        ``int(draw * number of positions)`` (see `place`).
    starts, counts
        int64 ``(N,)``: the glyphs of each scene.
    ink
        int64 ``(M, 4)``: ink boxes within each glyph (`ink_boxes`).
    image_height, image_width
        Scene size; every ink box must fit in it.
    max_overlap
        Largest allowed shared area, as a fraction of either box's area.
    attempts, restarts
        The bounds of the search.
    positions
        int64 ``(M, 2)``, written: ``(top, left)`` of each glyph's array in the scene
        (negative when the glyph's blank margin hangs over the edge).
    boxes
        int64 ``(M, 4)``, written: each glyph's ink box in scene coordinates.
    used
        int64 ``(1,)``, written: how many ``draws`` were used.

    Returns
    -------
    int
        -1, or the first scene whose glyphs could not be placed (its glyphs and the
        later scenes' are left as they were), or `OUT_OF_DRAWS`.
    """
    drawn = 0
    for s in range(starts.shape[0]):
        first, last = starts[s], starts[s] + counts[s]
        placed = False
        for _ in range(restarts + 1):
            placed = True
            for k in range(first, last):
                box_h, box_w = ink[k, 2] - ink[k, 0], ink[k, 3] - ink[k, 1]
                fits = False
                for _ in range(attempts):
                    if drawn + 2 > draws.shape[0]:
                        used[0] = drawn
                        return OUT_OF_DRAWS
                    # np.int64, not int(), which would be one more function to compile
                    top = np.int64(draws[drawn] * (image_height - box_h + 1))
                    left = np.int64(draws[drawn + 1] * (image_width - box_w + 1))
                    drawn += 2
                    boxes[k, 0], boxes[k, 1] = top, left
                    boxes[k, 2], boxes[k, 3] = top + box_h, left + box_w
                    fits = True
                    for j in range(first, k):
                        if _too_close(boxes, j, k, max_overlap):
                            fits = False
                            break
                    if fits:
                        positions[k, 0], positions[k, 1] = top - ink[k, 0], left - ink[k, 1]
                        break
                if not fits:
                    placed = False
                    break
            if placed:
                break
        if not placed:
            used[0] = drawn
            return s
    used[0] = drawn
    return -1


@njit(cache=True, inline="always")
def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` for 1-D contiguous rows, as a loop numba vectorises (slice assignment does not)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@njit(cache=True, **numba_cache.ENTRY)
def composite(
    rows: np.ndarray,
    glyphs: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    ink: np.ndarray,
    positions: np.ndarray,
    shown: np.ndarray,
    colours: np.ndarray,
    mask_values: np.ndarray,
    masks: np.ndarray,
    background: np.ndarray,
    crop: np.ndarray,
    flat_colours: np.ndarray,
    textures: np.ndarray,
    tex_offsets: np.ndarray,
    tex_widths: np.ndarray,
) -> None:
    """Paint every frame of ``rows`` in place: its scene's background, then the scene's glyphs in order.

    A scene of ``T`` frames (``T = positions.shape[1]``; 1 for a still scene) owns rows
    ``s * T`` to ``s * T + T - 1``. A glyph pixel of intensity ``a`` in colour ``c`` over
    ``b`` becomes ``(b * (255 - a) + c * a + 127) // 255`` per channel (alpha =
    intensity), so a white glyph on black reproduces the glyph's intensities exactly and
    a zero pixel leaves the background untouched.

    Parameters
    ----------
    rows
        uint8 ``(N * T, H, W * 3)``, overwritten: the frames' RGB rows (the caller's reshape
        of ``(N, T, H, W, 3)``, which numba would compile a function for).
    glyphs, starts, counts
        The glyphs and which scene owns them (module docstring).
    ink
        int64 ``(M, 4)``: each glyph's ink box (`ink_boxes`); only its pixels are
        blended (the rest of a glyph is zero, or padding).
    positions
        int64 ``(M, T, 2)``: ``(top, left)`` of each glyph in each frame; the parts
        outside the frame are clipped (a glyph wholly outside draws nothing).
    shown
        uint8 ``(M, T)``: 0 where a glyph is hidden in a frame.
    colours
        uint8 ``(M, 3)``: each glyph's RGB colour.
    mask_values, masks
        uint8 ``(M,)`` and uint8 ``(N * T, H, W)`` (zeros, or ``(0, 1, 1)`` for no masks):
        where a glyph with a non-zero mask value has ink, its frame's mask gets the value.
    background
        int64 ``(N,)``: the texture index of each scene, or -1 for a flat colour.
    crop
        int64 ``(N, 2)``: ``(top, left)`` of each scene's crop of its texture.
    flat_colours
        uint8 ``(N, 3)``: each flat-coloured scene's RGB colour.
    textures, tex_offsets, tex_widths
        The textures (module docstring); each crop must lie inside its texture.
    """
    n_frames, height, row_bytes = rows.shape[0], rows.shape[1], rows.shape[2]
    per_scene = positions.shape[1]
    width = row_bytes // 3  # 1-D row views below let numba vectorise
    with_masks = masks.shape[0] > 0
    for f in range(n_frames):
        s, frame = f // per_scene, f % per_scene
        t = background[s]
        if t < 0:
            first = rows[f, 0]
            for i in range(row_bytes):
                first[i] = flat_colours[s, i % 3]
            for y in range(1, height):
                _copy(rows[f, y], first)
        else:
            stride = tex_widths[t] * 3
            start = tex_offsets[t] + crop[s, 0] * stride + crop[s, 1] * 3
            for y in range(height):
                _copy(rows[f, y], textures[start + y * stride : start + y * stride + row_bytes])
        for k in range(starts[s], starts[s] + counts[s]):
            if shown[k, frame] == 0:
                continue
            top, left = positions[k, frame, 0], positions[k, frame, 1]
            value = mask_values[k]
            marks = with_masks and value != 0
            first_x, end_x = _larger(ink[k, 1], -left), _smaller(ink[k, 3], width - left)
            for gy in range(_larger(ink[k, 0], -top), _smaller(ink[k, 2], height - top)):
                dst = rows[f, top + gy]
                glyph_row = glyphs[k, gy]
                for gx in range(first_x, end_x):
                    alpha = np.int32(glyph_row[gx])  # 0 leaves the pixel as it is: no branch needed
                    x = (left + gx) * 3
                    for c in range(3):
                        mixed = np.int32(dst[x + c]) * (255 - alpha) + np.int32(colours[k, c]) * alpha
                        dst[x + c] = (mixed + 127) // 255
                if marks:  # a loop of its own: its branch would stop the blend above from vectorising
                    mask_row = masks[f, top + gy]
                    for gx in range(first_x, end_x):
                        if glyph_row[gx] != 0:
                            mask_row[left + gx] = value
