"""The numba kernel behind `glyphforge.resize`: two separable passes over blocks of images.

A block of ``n`` images is copied into *columns*, a 2-D buffer ``(width * channels,
n * height)`` whose line ``j`` holds column ``j`` of every image side by side, and the
horizontal pass combines whole lines of it; its result is copied into *rows*
``(height, n * width * channels)`` for the vertical pass, which combines whole rows.
Either way the innermost loop is one weight times a long contiguous line, which LLVM
vectorises. When the vertical pass comes first, the block starts as rows instead.

Sums are settled after each pass. Integer (int32) sums are Pillow's 8-bit fixed
point: ``clip((sum + 2**21) >> 22, 0, 255)``. Float sums follow a rule ``(bias,
divisor, rounding, low, high)``: ``v = (sum + bias) / divisor``, floored when
``rounding``, clipped to ``[low, high]``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from glyphforge.pipelines import numba_cache
from glyphforge.pipelines.resample_weights import FIXED_POINT_BITS

numba_cache.configure()  # before the kernels below set up their caches

Rule = tuple[float, float, float, float, float]


def _settle(acc: np.ndarray, out: np.ndarray, rule: Rule) -> None:
    """Write the settled ``acc[:len(out)]`` into ``out`` (compiled through the overload below)."""
    raise NotImplementedError("only callable from numba-compiled code")


@overload(_settle)
def _settle_for(acc, out, rule):  # numba types; returns the implementation for them
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
def _resample_lines(
    src: np.ndarray, dst: np.ndarray, starts: np.ndarray, weights: np.ndarray, channels: int, rule: Rule,
    acc: np.ndarray,
) -> None:
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
def _copy_stack(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[b, r, j] = src[b, r, j]`` for two ``(n, R, X)`` views (any strides)."""
    for b in range(src.shape[0]):
        for r in range(src.shape[1]):
            for j in range(src.shape[2]):
                dst[b, r, j] = src[b, r, j]


@njit(inline="always")
def _rows_view(rows: np.ndarray, count: int) -> np.ndarray:
    """The ``(count, R, X)`` images of a rows block ``(R, count * X)``."""
    return rows.reshape((rows.shape[0], count, rows.shape[1] // count)).transpose(1, 0, 2)


@njit(inline="always")
def _columns_view(columns: np.ndarray, count: int) -> np.ndarray:
    """The ``(count, R, X)`` images of a columns block ``(X, count * R)``."""
    return columns.reshape((columns.shape[0], count, columns.shape[1] // count)).transpose(1, 2, 0)


@njit(cache=True, nogil=True)
def resample(
    src: np.ndarray, dst: np.ndarray, start: int, stop: int, channels: int, vertical_first: bool,
    x_starts: np.ndarray, x_weights: np.ndarray, y_starts: np.ndarray, y_weights: np.ndarray,
    first_rule: Rule, second_rule: Rule, between: np.ndarray, block: int,
) -> None:
    """Resize images ``start:stop`` of ``src`` ``(N, H, W * C)`` into ``dst`` ``(N, Ho, Wo * C)``.

    It releases the GIL (``nogil``): `glyphforge.resize` runs parts of a large batch on
    a few Python threads at once. (A ``parallel=True`` variant compiled the kernel a
    second time, 4-7 s on a fresh machine per dtype, for no faster result.)

    ``x_*``/``y_*`` are the `AxisWeights` of width and height; ``first_rule`` and
    ``second_rule`` settle the passes; ``between`` is an empty array of the dtype that
    holds the first pass's result; ``block`` images are processed together.
    """
    height, line_in = src.shape[1], src.shape[2]
    out_height, line_out = dst.shape[1], dst.shape[2]
    acc = np.empty(block * max(height, line_in, line_out), x_weights.dtype)
    for first in range(start, stop, block):
        n = min(block, stop - first)
        images, resized = src[first : first + n], dst[first : first + n]
        if vertical_first:
            rows = np.empty((height, n * line_in), src.dtype)
            _copy_stack(images, _rows_view(rows, n))
            rows_mid = np.empty((out_height, n * line_in), between.dtype)
            _resample_lines(rows, rows_mid, y_starts, y_weights, 1, first_rule, acc)
            columns_mid = np.empty((line_in, n * out_height), between.dtype)
            _copy_stack(_rows_view(rows_mid, n), _columns_view(columns_mid, n))
            columns_out = np.empty((line_out, n * out_height), dst.dtype)
            _resample_lines(columns_mid, columns_out, x_starts, x_weights, channels, second_rule, acc)
            _copy_stack(_columns_view(columns_out, n), resized)
        else:
            columns = np.empty((line_in, n * height), src.dtype)
            _copy_stack(images, _columns_view(columns, n))
            columns_mid = np.empty((line_out, n * height), between.dtype)
            _resample_lines(columns, columns_mid, x_starts, x_weights, channels, first_rule, acc)
            rows_mid = np.empty((height, n * line_out), between.dtype)
            _copy_stack(_columns_view(columns_mid, n), _rows_view(rows_mid, n))
            rows_out = np.empty((out_height, n * line_out), dst.dtype)
            _resample_lines(rows_mid, rows_out, y_starts, y_weights, 1, second_rule, acc)
            _copy_stack(_rows_view(rows_out, n), resized)
