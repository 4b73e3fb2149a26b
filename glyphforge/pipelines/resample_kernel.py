"""The numba kernel behind `glyphforge.resize`: two separable passes over blocks of images.

Every array the kernel sees is flat (1-D, C order) and every layout is index arithmetic
on it, with no reshaped or transposed views: numba compiles that in a fraction of the
time (the views cost it seconds per dtype on a fresh machine). Indexes inside loops are
unsigned, or count from a view's start, so numba adds no negative-index check that
would keep LLVM from vectorising the loop.

A block of ``n`` images is copied into a buffer of *lines*: line ``l`` holds line ``l``
of every image side by side (``n * S`` values, image ``b`` at ``b * S``). The first pass
combines whole lines into new lines; their result is regrouped into the lines of the
other axis for the second pass, whose result is scattered into the output images.
Either way the innermost loop is one weight times a long contiguous line, which LLVM
vectorises. The pass order only changes the sizes and strides of the copies, not the
code that runs. Buffers hold the ``between`` dtype: values are converted on the way in
and out (uint8 area sums stay exact in float32; see `glyphforge.pipelines.resize`).

Sums are settled after each pass by a rule ``(bias, factor, divide, rounding, low,
high)``: ``v = (sum + bias) / factor`` when ``divide``, else ``(sum + bias) * factor``,
floored when ``rounding``, clipped to ``[low, high]``. Pillow's 8-bit fixed point,
``clip((sum + 2**21) >> 22, 0, 255)`` of int32 sums, is the rule ``(2**21, 2**-22, 0, 1,
0, 255)``: float64 holds every step of it exactly, so integer and float sums share one
settle (one compiled function less than a settle per type).

What a first call compiles is kept small (see benchmarks/README.md, "Cold start"): the
caller hands in every buffer (numba compiles no allocation), arguments are flat (no
tuples of arrays to unbox), ``min``/``max`` are written out (numba compiles each as a
function of its own), one settle serves every sum type, and only the entry point gets
wrappers callable from Python.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from glyphforge.pipelines import numba_cache

numba_cache.configure()  # before the kernels below set up their caches

Rule = tuple[float, float, float, float, float, float]


@njit(nogil=True, **numba_cache.INNER)
def _resample_lines(
    src: np.ndarray, dst: np.ndarray, lines: int, length: int, starts: np.ndarray, weights: np.ndarray, channels: int,
    rule: Rule, acc: np.ndarray,
) -> None:
    """Line ``o < lines`` of ``dst`` = settle(sum_t weights[p, t] * line (starts[p] + t) * channels + c of ``src``).

    ``o = p * channels + c``; lines are ``length`` values long; ``acc`` holds at least ``length`` sums;
    ``rule`` settles them (module docstring).
    """
    bias, factor, divide, rounding, low, high = rule
    for o in range(lines):
        pixel = o // channels
        first = starts[pixel] * channels + o - pixel * channels
        for i in range(length):
            acc[i] = 0
        for t in range(weights.shape[1]):
            weight = weights[pixel, t]
            line = (first + t * channels) * length
            for i in range(length):
                acc[i] += src[np.uint64(line + i)] * weight
        out = o * length
        for i in range(length):
            value = (acc[i] + bias) / factor if divide else (acc[i] + bias) * factor
            value = np.floor(value) if rounding else value
            value = low if value < low else value  # not min() and max(): numba compiles each as a function
            dst[np.uint64(out + i)] = high if value > high else value


@njit(nogil=True, inline="always")
def _copy(
    src: np.ndarray, src_start: int, s0: int, s1: int,
    dst: np.ndarray, dst_start: int, d0: int, d1: int, d2: int, n0: int, n1: int, n2: int,
) -> None:
    """``dst[dst_start + b*d0 + i*d1 + j*d2] = src[src_start + b*s0 + i*s1 + j]`` for ``b, i, j < n0, n1, n2``."""
    for b in range(n0):
        for i in range(n1):
            source = src_start + b * s0 + i * s1
            target = dst_start + b * d0 + i * d1
            for j in range(n2):
                dst[np.uint64(target + j * d2)] = src[np.uint64(source + j)]


@njit(cache=True, nogil=True, **numba_cache.ENTRY)
def resample(
    src: np.ndarray, dst: np.ndarray, start: int, stop: int,
    height: int, line_in: int, out_height: int, line_out: int, vertical_first: bool,
    starts1: np.ndarray, weights1: np.ndarray, channels1: int, rule1: Rule,
    starts2: np.ndarray, weights2: np.ndarray, channels2: int, rule2: Rule,
    block: int, acc1: np.ndarray, acc2: np.ndarray, lines_a: np.ndarray, lines_b: np.ndarray,
) -> None:
    """Resize images ``start:stop`` of ``src`` into ``dst`` (both flat, C order).

    It releases the GIL (``nogil``): `glyphforge.resize` runs parts of a large batch on
    a few Python threads at once.

    Image ``b`` is ``src[b*H*W*C : (b+1)*H*W*C]`` in ``height`` rows of ``line_in = W * C``
    values, likewise in ``dst`` (``out_height`` rows of ``line_out``). ``starts1, weights1,
    channels1, rule1`` are the windows of the axis the first pass resamples (the height's
    when ``vertical_first``), the others the second's. ``block`` images are processed
    together in the caller's buffers: ``acc1`` and ``acc2`` hold a line of sums of each pass,
    ``lines_a`` and ``lines_b`` (of the dtype between the passes) the block's lines before
    and after each pass (`glyphforge.pipelines.resize` sizes them).
    """
    image_in, image_out = height * line_in, out_height * line_out
    # pass 1 makes lines1_out lines, pass 2 lines2_out from per1; image b holds per1 values
    # of every line of pass 1 and lines1_out of every line of pass 2
    if vertical_first:
        lines1_out, per1, lines2_out = out_height, line_in, line_out
    else:
        lines1_out, per1, lines2_out = line_out, height, out_height
    for first in range(start, stop, block):
        n = stop - first if stop - first < block else block
        length1, length2 = n * per1, n * lines1_out
        # image b's (row y, column x) -> line y or x of pass 1, position b * per1 + x or y
        row, column = (length1, 1) if vertical_first else (1, length1)
        _copy(src, first * image_in, image_in, line_in, lines_a, 0, per1, row, column, n, height, line_in)
        _resample_lines(lines_a, lines_b, lines1_out, length1, starts1, weights1, channels1, rule1, acc1)
        # lines_b's line p, position b * per1 + k -> line k of pass 2, position b * lines1_out + p
        _copy(lines_b, 0, per1, length1, lines_a, 0, lines1_out, 1, length2, n, lines1_out, per1)
        _resample_lines(lines_a, lines_b, lines2_out, length2, starts2, weights2, channels2, rule2, acc2)
        # lines_b's line q, position b * lines1_out + p -> image b's (row q, column p) or (row p, column q)
        row, column = (1, line_out) if vertical_first else (line_out, 1)
        _copy(lines_b, 0, lines1_out, length2, dst, first * image_out, image_out, row, column, n, lines2_out,
              lines1_out)
