"""The numba kernel behind `glyphforge.resize`: two separable passes over blocks of images.

A block of ``n`` images is laid out as *rows*: a 2-D buffer ``(height, n * width *
channels)`` whose line ``r`` holds row ``r`` of every image side by side. The
vertical pass combines whole lines; the horizontal pass transposes the block to
*columns* ``(width * channels, n * height)``, combines those lines, and transposes
back. Either way the innermost loop is one weight times a long contiguous line,
which LLVM vectorises.

Sums are settled after each pass. Integer (int32) sums are Pillow's 8-bit fixed
point: ``clip((sum + 2**21) >> 22, 0, 255)``. Float sums follow a rule ``(bias,
divisor, rounding, low, high)``: ``v = (sum + bias) / divisor``, floored when
``rounding``, clipped to ``[low, high]``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from glyphforge.pipelines.resample_weights import FIXED_POINT_BITS

Rule = tuple[float, float, float, float, float]


def _settle(acc: np.ndarray, out: np.ndarray, rule: Rule) -> None:
    """Write the settled ``acc[:len(out)]`` into ``out`` (compiled through the overload below)."""
    raise NotImplementedError("only callable from numba-compiled code")


@overload(_settle)
def _settle_for(acc, out, rule):
    if isinstance(acc.dtype, types.Integer):
        half, shift = 1 << (FIXED_POINT_BITS - 1), FIXED_POINT_BITS

        def fixed_point(acc, out, rule):
            for i in range(out.shape[0]):
                out[i] = min(max((acc[i] + half) >> shift, 0), 255)

        return fixed_point

    def floating(acc, out, rule):
        bias, divisor, rounding, low, high = rule
        for i in range(out.shape[0]):
            value = (acc[i] + bias) / divisor
            out[i] = min(max(np.floor(value) if rounding else value, low), high)

    return floating


@njit(inline="always")
def _resample_lines(src, dst, starts, weights, channels, rule, acc):
    """``dst[o] = settle(sum_t weights[p, t] * src[(starts[p] + t) * channels + c])``, ``o = p * channels + c``."""
    length = src.shape[1]
    for o in range(dst.shape[0]):
        pixel = o // channels
        first = starts[pixel] * channels + o - pixel * channels
        acc[:length] = 0
        for t in range(weights.shape[1]):
            weight = weights[pixel, t]
            line = src[first + t * channels]
            for i in range(length):
                acc[i] += line[i] * weight
        _settle(acc, dst[o], rule)


@njit(inline="always")
def _transpose_block(src, dst, count):
    """``dst[j, b * R + r] = src[r, b * X + j]`` for ``src`` ``(R, count * X)``."""
    rows, width = src.shape[0], src.shape[1] // count
    for b in range(count):
        for r in range(rows):
            line = src[r]
            for j in range(width):
                dst[j, b * rows + r] = line[b * width + j]


@njit(inline="always")
def _horizontal_pass(rows_in, rows_out, count, starts, weights, channels, rule, acc):
    """Resample the rows of a block along their width, through a transposed copy."""
    height = rows_in.shape[0]
    columns = np.empty((rows_in.shape[1] // count, count * height), rows_in.dtype)
    _transpose_block(rows_in, columns, count)
    columns_out = np.empty((rows_out.shape[1] // count, count * height), rows_out.dtype)
    _resample_lines(columns, columns_out, starts, weights, channels, rule, acc)
    _transpose_block(columns_out, rows_out, count)


@njit(cache=True)
def resample(
    src, dst, start, stop, channels, vertical_first, x_starts, x_weights, y_starts, y_weights,
    first_rule, second_rule, between, block,
):
    """Resize images ``start:stop`` of ``src`` ``(N, H, W * C)`` into ``dst`` ``(N, Ho, Wo * C)``.

    ``x_*``/``y_*`` are the `AxisWeights` of width and height; ``first_rule`` and
    ``second_rule`` settle the passes; ``between`` is an empty array of the dtype that
    holds the first pass's result; ``block`` images are processed together.
    """
    height, line_in = src.shape[1], src.shape[2]
    out_height, line_out = dst.shape[1], dst.shape[2]
    mid_height, mid_line = (out_height, line_in) if vertical_first else (height, line_out)
    acc = np.empty(block * max(height, line_in, line_out), x_weights.dtype)
    for first in range(start, stop, block):
        n = min(block, stop - first)
        rows_in = np.empty((height, n * line_in), src.dtype)
        for b in range(n):
            rows_in[:, b * line_in : (b + 1) * line_in] = src[first + b]
        rows_mid = np.empty((mid_height, n * mid_line), between.dtype)
        rows_out = np.empty((out_height, n * line_out), dst.dtype)
        if vertical_first:
            _resample_lines(rows_in, rows_mid, y_starts, y_weights, 1, first_rule, acc)
            _horizontal_pass(rows_mid, rows_out, n, x_starts, x_weights, channels, second_rule, acc)
        else:
            _horizontal_pass(rows_in, rows_mid, n, x_starts, x_weights, channels, first_rule, acc)
            _resample_lines(rows_mid, rows_out, y_starts, y_weights, 1, second_rule, acc)
        for b in range(n):
            dst[first + b] = rows_out[:, b * line_out : (b + 1) * line_out]


@njit(parallel=True, cache=True)
def resample_parallel(
    src, dst, parts, channels, vertical_first, x_starts, x_weights, y_starts, y_weights,
    first_rule, second_rule, between, block,
):
    """`resample` of the whole batch, cut into ``parts`` runs of images shared by the threads."""
    count = src.shape[0]
    for part in prange(parts):
        resample(
            src, dst, part * count // parts, (part + 1) * count // parts, channels, vertical_first,
            x_starts, x_weights, y_starts, y_weights, first_rule, second_rule, between, block,
        )
