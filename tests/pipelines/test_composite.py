"""The numba scene kernels: ink boxes, rejection-sampled placement, alpha compositing."""
from __future__ import annotations

import numpy as np
import pytest

from glyphforge.pipelines import composite as kernels
from glyphforge.pipelines.composite import composite

NO_TEXTURES = (np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))


def ink_boxes(glyphs, heights, widths):
    """`kernels.ink_boxes` into a fresh array, returned."""
    boxes = np.empty((len(glyphs), 4), np.int64)
    kernels.ink_boxes(glyphs, heights, widths, boxes)
    return boxes


def place_glyphs(rng, starts, counts, ink, *options):
    """`kernels.place` into fresh arrays: ``(positions, boxes, failed)``."""
    positions, boxes = np.zeros((len(ink), 2), np.int64), np.zeros((len(ink), 4), np.int64)
    failed = kernels.place(rng, starts, counts, ink, *options, positions, boxes)
    return positions, boxes, failed


def _glyph_batch(shapes_and_pixels):
    """Glyphs padded to the largest shape, from ``[(h, w, [(y, x, value), ...]), ...]``."""
    hmax = max(h for h, _, _ in shapes_and_pixels)
    wmax = max(w for _, w, _ in shapes_and_pixels)
    glyphs = np.zeros((len(shapes_and_pixels), hmax, wmax), np.uint8)
    for k, (_, _, pixels) in enumerate(shapes_and_pixels):
        for y, x, value in pixels:
            glyphs[k, y, x] = value
    heights = np.array([h for h, _, _ in shapes_and_pixels], np.int64)
    widths = np.array([w for _, w, _ in shapes_and_pixels], np.int64)
    return glyphs, heights, widths


def test_ink_boxes_are_tight_and_blank_glyphs_get_their_whole_rectangle():
    glyphs, heights, widths = _glyph_batch([
        (5, 6, [(1, 2, 9), (3, 4, 200)]),
        (4, 4, [(0, 0, 1)]),
        (3, 2, []),
        (5, 6, [(4, 5, 255)]),
    ])
    glyphs[2, 0, 3] = 255  # padding beyond the glyph's width is not part of it
    assert ink_boxes(glyphs, heights, widths).tolist() == [[1, 2, 4, 5], [0, 0, 1, 1], [0, 0, 3, 2], [4, 5, 5, 6]]


def _overlap_fraction(a, b):
    height = min(a[2], b[2]) - max(a[0], b[0])
    width = min(a[3], b[3]) - max(a[1], b[1])
    if height <= 0 or width <= 0:
        return 0.0
    shared = height * width
    return max(shared / ((a[2] - a[0]) * (a[3] - a[1])), shared / ((b[2] - b[0]) * (b[3] - b[1])))


@pytest.mark.parametrize("max_overlap", [0.0, 0.25])
def test_placement_keeps_boxes_inside_and_honours_max_overlap(max_overlap):
    rng = np.random.default_rng(1)
    counts = rng.integers(1, 5, 500)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    total = int(counts.sum())
    top, left = rng.integers(0, 4, total), rng.integers(0, 4, total)
    ink = np.stack([top, left, top + rng.integers(3, 10, total), left + rng.integers(3, 10, total)], 1)
    positions, boxes, failed = place_glyphs(rng, starts, counts, ink, 30, 40, max_overlap, 100, 10)
    assert failed == -1
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= 30).all() and (boxes[:, 3] <= 40).all()
    np.testing.assert_array_equal(boxes[:, 2:] - boxes[:, :2], ink[:, 2:] - ink[:, :2])
    np.testing.assert_array_equal(positions, boxes[:, :2] - ink[:, :2])
    worst = 0.0
    for s in range(len(counts)):
        scene = boxes[starts[s] : starts[s] + counts[s]]
        for i in range(len(scene)):
            for j in range(i):
                worst = max(worst, _overlap_fraction(scene[i], scene[j]))
    assert worst <= max_overlap
    if max_overlap:
        assert worst > 0  # overlaps up to the bound really happen


def test_placement_reports_the_first_scene_it_cannot_place():
    counts = np.array([1, 2, 5], np.int64)  # five 5x5 boxes cannot share a 10x10 image without overlap
    starts = np.array([0, 1, 3], np.int64)
    ink = np.tile(np.array([[0, 0, 5, 5]], np.int64), (8, 1))
    _, _, failed = place_glyphs(np.random.default_rng(0), starts, counts, ink, 10, 10, 0.0, 20, 3)
    assert failed == 2


def test_placement_is_deterministic_given_the_generator():
    counts = np.full(50, 3, np.int64)
    starts = np.arange(0, 150, 3, dtype=np.int64)
    ink = np.tile(np.array([[1, 2, 9, 8]], np.int64), (150, 1))
    first = place_glyphs(np.random.default_rng(7), starts, counts, ink, 24, 24, 0.1, 100, 10)
    second = place_glyphs(np.random.default_rng(7), starts, counts, ink, 24, 24, 0.1, 100, 10)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])


def _composite(n, size, glyphs, heights, widths, starts, counts, positions, colours, background, crop, flat, textures):
    out = np.full((n, *size, 3), 77, np.uint8)  # garbage that must all be overwritten
    ink = ink_boxes(glyphs, heights, widths)
    still = np.ones((len(glyphs), 1), np.uint8)  # one frame, every glyph shown, no masks
    composite(out.reshape(n, size[0], -1), glyphs, starts, counts, ink, positions.reshape(-1, 1, 2), still, colours,
              np.zeros(len(glyphs), np.uint8), np.zeros((0, 1, 1), np.uint8), background, crop, flat, *textures)
    return out


def test_white_glyph_on_black_reproduces_its_intensities_and_clips_at_the_edges():
    rng = np.random.default_rng(3)
    glyph = rng.integers(0, 256, (6, 5)).astype(np.uint8)
    glyphs, heights, widths = glyph[None], np.array([6]), np.array([5])
    positions = np.array([[-2, 7]], np.int64)  # two rows above the top, one column past the right edge
    out = _composite(
        1, (8, 11), glyphs, heights, widths, np.array([0]), np.array([1]), positions,
        np.array([[255, 255, 255]], np.uint8), np.array([-1]), np.zeros((1, 2), np.int64),
        np.zeros((1, 3), np.uint8), NO_TEXTURES,
    )
    expected = np.zeros((8, 11), np.uint8)
    expected[0:4, 7:11] = glyph[2:6, 0:4]
    for c in range(3):
        np.testing.assert_array_equal(out[0, :, :, c], expected)


def test_alpha_blend_of_coloured_glyphs_over_a_texture_crop_and_flat_colour():
    texture = np.random.default_rng(4).integers(0, 256, (9, 12, 3)).astype(np.uint8)
    other = np.full((5, 5, 3), 9, np.uint8)
    flat_textures = np.concatenate([other.ravel(), texture.ravel()])
    textures = (flat_textures, np.array([0, other.size], np.int64), np.array([5, 12], np.int64))
    glyphs, heights, widths = _glyph_batch([(2, 2, [(0, 0, 255), (0, 1, 128), (1, 1, 1)]), (1, 1, [(0, 0, 100)])])
    colour = np.array([[200, 10, 0], [0, 255, 40]], np.uint8)
    out = _composite(
        2, (4, 5), glyphs, heights, widths, np.array([0, 1]), np.array([1, 1]),
        np.array([[1, 2], [3, 4]], np.int64), colour, np.array([1, -1]), np.array([[3, 6], [0, 0]], np.int64),
        np.array([[0, 0, 0], [20, 30, 250]], np.uint8), textures,
    )
    scene = texture[3:7, 6:11].astype(np.int64)
    for (y, x), alpha in {(1, 2): 255, (1, 3): 128, (2, 3): 1}.items():
        scene[y, x] = (scene[y, x] * (255 - alpha) + colour[0].astype(np.int64) * alpha + 127) // 255
    np.testing.assert_array_equal(out[0], scene)
    flat = np.tile(np.array([20, 30, 250], np.int64), (4, 5, 1))
    flat[3, 4] = (flat[3, 4] * 155 + colour[1].astype(np.int64) * 100 + 127) // 255
    np.testing.assert_array_equal(out[1], flat)


def test_later_glyphs_are_painted_over_earlier_ones():
    glyphs, heights, widths = _glyph_batch([(1, 1, [(0, 0, 255)]), (1, 1, [(0, 0, 255)])])
    out = _composite(
        1, (2, 2), glyphs, heights, widths, np.array([0]), np.array([2]), np.array([[0, 0], [0, 0]], np.int64),
        np.array([[255, 0, 0], [0, 0, 255]], np.uint8), np.array([-1]), np.zeros((1, 2), np.int64),
        np.zeros((1, 3), np.uint8), NO_TEXTURES,
    )
    assert out[0, 0, 0].tolist() == [0, 0, 255]
    assert out[0, 1, 1].tolist() == [0, 0, 0]


def test_ink_boxes_equal_a_pixel_loop_on_random_padded_glyphs():
    rng = np.random.default_rng(12)
    glyphs = (rng.random((300, 9, 11)) < 0.04).astype(np.uint8) * rng.integers(1, 256, (300, 9, 11), dtype=np.uint8)
    padded = rng.integers(1, 10, 300), rng.integers(1, 12, 300)
    whole = np.full(300, 9), np.full(300, 11)  # no padding anywhere
    for heights, widths in (padded, whole):
        expected = []
        for glyph, h, w in zip(glyphs, heights, widths, strict=True):
            ys, xs = np.nonzero(glyph[:h, :w])
            expected.append([ys.min(), xs.min(), ys.max() + 1, xs.max() + 1] if len(ys) else [0, 0, h, w])
        assert ink_boxes(glyphs, heights, widths).tolist() == expected
    blank = sum(1 for glyph, h, w in zip(glyphs, *padded, strict=True) if not glyph[:h, :w].any())
    assert 10 < blank < 290  # both kinds occur, and padding pixels are set


def _place_one_draw_at_a_time(rng, starts, counts, ink, height, width, max_overlap, attempts, restarts):
    """`kernels.place` in plain Python, each number drawn from ``rng`` when needed."""
    positions, boxes = np.zeros((len(ink), 2), np.int64), np.zeros((len(ink), 4), np.int64)
    for s in range(len(starts)):
        first, last = starts[s], starts[s] + counts[s]
        for _ in range(restarts + 1):
            placed = True
            for k in range(first, last):
                box_h, box_w = ink[k, 2] - ink[k, 0], ink[k, 3] - ink[k, 1]
                for _ in range(attempts):
                    top, left = int(rng.random() * (height - box_h + 1)), int(rng.random() * (width - box_w + 1))
                    boxes[k] = top, left, top + box_h, left + box_w
                    if all(_overlap_fraction(boxes[j], boxes[k]) <= max_overlap for j in range(first, k)):
                        positions[k] = top - ink[k, 0], left - ink[k, 1]
                        break
                else:
                    placed = False
                    break
            if placed:
                break
        else:
            return positions, boxes, s
    return positions, boxes, -1


@pytest.mark.parametrize(("size", "expected_failure"), [(16, False), (11, True)])
def test_placement_draws_what_one_draw_at_a_time_would_and_leaves_the_generator_there(size, expected_failure):
    counts = np.full(40, 4, np.int64)  # crowded: many rejections, more numbers than drawn ahead at first
    starts = np.arange(0, 160, 4, dtype=np.int64)
    ink = np.tile(np.array([[0, 0, 5, 5]], np.int64), (160, 1))
    options = (size, size, 0.0, 30, 5)
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    positions, boxes, failed = place_glyphs(ours, starts, counts, ink, *options)
    expected = _place_one_draw_at_a_time(theirs, starts, counts, ink, *options)
    assert (failed >= 0) == expected_failure
    assert failed == expected[2]
    np.testing.assert_array_equal(positions, expected[0])
    np.testing.assert_array_equal(boxes, expected[1])
    assert ours.random() == theirs.random()  # the generator is left where the draws ended
