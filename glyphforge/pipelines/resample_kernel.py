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


def _settle(acc: np.ndarray, out: np.ndarray, offset: int, length: int, rule: Rule) -> None:
    """Write settled ``acc[i]``, ``i < length``, into ``out[offset + i]`` (compiled through the overload below)."""
    raise NotImplementedError("only callable from numba-compiled code")


@overload(_settle)
def _settle_for(acc, out, offset, length, rule):  # numba types; returns the implementation for them
    if isinstance(acc.dtype, types.Integer):
        half, shift = 1 << (FIXED_POINT_BITS - 1), FIXED_POINT_BITS

        def fixed_point(acc, out, offset, length, rule):
            line = out[offset:]
            for i in range(length):
                line[i] = min(max((acc[i] + half) >> shift, 0), 255)

        return fixed_point

    def floating(acc, out, offset, length, rule):
        bias, divisor, rounding, low, high = rule
        line = out[offset:]
        for i in range(length):
            value = (acc[i] + bias) / divisor
            line[i] = min(max(np.floor(value) if rounding else value, low), high)

    return floating


@njit(nogil=True)
def _resample_lines(
    src: np.ndarray, dst: np.ndarray, lines: int, length: int, starts: np.ndarray, weights: np.ndarray, channels: int,
    rule: Rule, acc: np.ndarray,
) -> None:
    """Line ``o < lines`` of ``dst`` = settle(sum_t weights[p, t] * line (starts[p] + t) * channels + c of ``src``).

    ``o = p * channels + c``; lines are ``length`` values long; ``acc`` holds at least ``length`` sums.
    """
    for o in range(lines):
        pixel = o // channels
        first = starts[pixel] * channels + o - pixel * channels
        for i in range(length):
            acc[i] = 0
        for t in range(weights.shape[1]):
            weight = weights[pixel, t]
            line = src[(first + t * channels) * length :]  # a view: i below is known not negative
            for i in range(length):
                acc[i] += line[i] * weight
        _settle(acc, dst, o * length, length, rule)


@njit(nogil=True, inline="always")
def _copy(
    src: np.ndarray, src_start: int, src_strides: tuple[int, int, int],
    dst: np.ndarray, dst_start: int, dst_strides: tuple[int, int, int], shape: tuple[int, int, int],
) -> None:
    """``dst[dst_start + b*d0 + i*d1 + j*d2] = src[src_start + b*s0 + i*s1 + j*s2]`` over ``shape``.

    Inlined: as its own function, numba would compile it again for every literal argument.
    """
    for b in range(shape[0]):
        for i in range(shape[1]):
            source = src_start + b * src_strides[0] + i * src_strides[1]
            target = dst_start + b * dst_strides[0] + i * dst_strides[1]
            for j in range(shape[2]):
                dst[np.uint64(target + j * dst_strides[2])] = src[np.uint64(source + j * src_strides[2])]


@njit(cache=True, nogil=True)
def resample(
    src: np.ndarray, dst: np.ndarray, start: int, stop: int, sizes: tuple[int, int, int, int],
    vertical_first: bool, first_pass: tuple, second_pass: tuple, between: np.ndarray, block: int,
) -> None:
    """Resize images ``start:stop`` of ``src`` into ``dst`` (both flat, C order).

    It releases the GIL (``nogil``): `glyphforge.resize` runs parts of a large batch on
    a few Python threads at once.

    ``sizes`` is ``(H, W * C, Ho, Wo * C)``: image ``b`` is ``src[b*H*W*C : (b+1)*H*W*C]``
    in rows of ``W * C`` values, likewise in ``dst``. ``first_pass`` and ``second_pass``
    are ``(starts, weights, channels, rule)`` of the axis each resamples (the height's
    first when ``vertical_first``); ``between`` is an empty array of the dtype that
    holds the first pass's result (and every buffer of the kernel); ``block`` images
    are processed together.
    """
    height, line_in, out_height, line_out = sizes
    starts1, weights1, channels1, rule1 = first_pass
    starts2, weights2, channels2, rule2 = second_pass
    image_in, image_out = height * line_in, out_height * line_out
    # pass 1 turns lines1 lines into lines1_out, pass 2 per1 lines into lines2_out; image b
    # holds per1 values of every line of pass 1 and lines1_out of every line of pass 2
    if vertical_first:
        lines1, lines1_out, per1, lines2_out = height, out_height, line_in, line_out
    else:
        lines1, lines1_out, per1, lines2_out = line_in, line_out, height, out_height
    acc1 = np.empty(block * per1, weights1.dtype)
    acc2 = np.empty(block * lines1_out, weights2.dtype)
    for first in range(start, stop, block):
        n = min(block, stop - first)
        length1, length2 = n * per1, n * lines1_out
        # image b's (row y, column x) -> line y or x of pass 1, position b * per1 + x or y
        gathered = np.empty(lines1 * length1, between.dtype)
        to_lines = (per1, length1, 1) if vertical_first else (per1, 1, length1)
        _copy(src, first * image_in, (image_in, line_in, 1), gathered, 0, to_lines, (n, height, line_in))
        mid = np.empty(lines1_out * length1, between.dtype)
        _resample_lines(gathered, mid, lines1_out, length1, starts1, weights1, channels1, rule1, acc1)
        # mid's line p, position b * per1 + k -> line k of pass 2, position b * lines1_out + p
        regrouped = np.empty(per1 * length2, between.dtype)
        _copy(mid, 0, (per1, length1, 1), regrouped, 0, (lines1_out, 1, length2), (n, lines1_out, per1))
        out = np.empty(lines2_out * length2, between.dtype)
        _resample_lines(regrouped, out, lines2_out, length2, starts2, weights2, channels2, rule2, acc2)
        # out's line q, position b * lines1_out + p -> image b's (row q, column p) or (row p, column q)
        to_image = (image_out, 1, line_out) if vertical_first else (image_out, line_out, 1)
        _copy(out, 0, (lines1_out, length2, 1), dst, first * image_out, to_image, (n, lines2_out, lines1_out))
