"""Per-axis resampling weights: Pillow's BOX/BILINEAR/LANCZOS and exact area coverage.

A resize is separable: along each axis, output pixel ``o`` is a weighted sum of
input pixels ``starts[o] .. starts[o] + taps - 1``. This module computes those
windows once per ``(input size, output size, method)``; the numba kernel in
`glyphforge.pipelines.resample_kernel` applies them.

Pillow's weights are computed exactly as ``libImaging/Resample.c`` does (same
double arithmetic, same ``math.sin``), so the kernel reproduces Pillow bit for bit.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import numpy as np

#: A resize method, as `glyphforge.pipelines.resize.resize` and `glyphforge.loaders.ImageList` take it.
Method = Literal["box", "bilinear", "lanczos", "area"]

PILLOW_METHODS: tuple[Method, ...] = ("box", "bilinear", "lanczos")
METHODS: tuple[Method, ...] = (*PILLOW_METHODS, "area")

#: Pillow's fixed point for 8-bit images: 32 bits minus 8 for the pixel, 2 for overflow.
FIXED_POINT_BITS = 22


class AxisWeights(NamedTuple):
    """Windows of one axis: ``out[o] = sum_t weights[o, t] * in[starts[o] + t]``.

    Windows are padded with zero weights to a common number of taps and moved
    left where needed so that every window lies inside the input.
    """

    starts: np.ndarray
    weights: np.ndarray


def _box(x: float) -> float:
    return 1.0 if -0.5 < x <= 0.5 else 0.0


def _bilinear(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos(x: float) -> float:
    return _sinc(x) * _sinc(x / 3) if -3.0 <= x < 3.0 else 0.0


_FILTERS: dict[str, tuple[Callable[[float], float], float]] = {
    "box": (_box, 0.5),
    "bilinear": (_bilinear, 1.0),
    "lanczos": (_lanczos, 3.0),
}


def _pillow_windows(in_size: int, out_size: int, method: str) -> list[tuple[int, list[float]]]:
    """Pillow's ``precompute_coeffs``: each output's first input index and normalised weights."""
    kernel, support = _FILTERS[method]
    scale = in_size / out_size
    filter_scale = max(scale, 1.0)
    support *= filter_scale
    inverse = 1.0 / filter_scale
    windows = []
    for o in range(out_size):
        center = (o + 0.5) * scale
        first = max(int(center - support + 0.5), 0)
        count = min(int(center + support + 0.5), in_size) - first
        weights = [kernel((i + first - center + 0.5) * inverse) for i in range(count)]
        total = 0.0
        for weight in weights:  # sequential, as in C (Python's sum() compensates)
            total += weight
        if total != 0.0:
            weights = [weight / total for weight in weights]
        windows.append((first, weights))
    return windows


def _to_fixed_point(weight: float) -> int:
    """Pillow's ``normalize_coeffs_8bpc``: round half away from zero to 22 fractional bits."""
    scaled = weight * (1 << FIXED_POINT_BITS)
    return int(scaled - 0.5) if weight < 0 else int(scaled + 0.5)


def _pack(windows: Sequence[tuple[int, Sequence[float]]], in_size: int, dtype: type[np.generic]) -> AxisWeights:
    taps = max(len(weights) for _, weights in windows)
    starts = np.empty(len(windows), np.int64)
    packed: np.ndarray = np.zeros((len(windows), taps), dtype)
    for o, (first, weights) in enumerate(windows):
        start = min(first, in_size - taps)
        starts[o] = start
        packed[o, first - start : first - start + len(weights)] = weights
    return AxisWeights(starts, packed)


@functools.lru_cache(maxsize=256)
def pillow_weights(in_size: int, out_size: int, method: str, fixed_point: bool) -> AxisWeights:
    """Pillow's weights for one axis.

    Parameters
    ----------
    in_size, out_size
        Input and output length of the axis.
    method
        ``"box"``, ``"bilinear"`` or ``"lanczos"``.
    fixed_point
        True: int32 weights with 22 fractional bits (Pillow's 8-bit path);
        False: the normalised float64 weights (Pillow's ``"F"`` mode path).

    Returns
    -------
    AxisWeights
        Read-only arrays. An unchanged axis gets the identity (Pillow skips that pass).
    """
    if in_size == out_size:
        windows = [(o, [1.0]) for o in range(out_size)]
    else:
        windows = _pillow_windows(in_size, out_size, method)
    if fixed_point:
        fixed = [(first, [_to_fixed_point(w) for w in weights]) for first, weights in windows]
        return _read_only(_pack(fixed, in_size, np.int32))
    return _read_only(_pack(windows, in_size, np.float64))


@functools.lru_cache(maxsize=256)
def area_weights(in_size: int, out_size: int, exact: bool) -> AxisWeights:
    """Area-coverage weights for one axis.

    Output pixel ``o`` covers input interval ``[o * in/out, (o + 1) * in/out)``; each
    input pixel weighs the length of its overlap with that interval.

    Parameters
    ----------
    in_size, out_size
        Input and output length of the axis.
    exact
        True: integer overlaps in units of ``1 / out_size`` input pixels, which sum to
        ``in_size`` per output (exact arithmetic for uint8; divide by ``in_size``);
        False: the overlaps as fractions of the output pixel (they sum to 1).

    Returns
    -------
    AxisWeights
        Read-only float64 arrays (integer-valued when ``exact``).
    """
    windows = []
    for o in range(out_size):
        lo, hi = o * in_size, (o + 1) * in_size  # in units of 1 / out_size input pixels
        first, last = lo // out_size, -(-hi // out_size)
        overlaps = [min(hi, (i + 1) * out_size) - max(lo, i * out_size) for i in range(first, last)]
        windows.append((first, overlaps if exact else [v / in_size for v in overlaps]))
    return _read_only(_pack(windows, in_size, np.float64))


def _read_only(weights: AxisWeights) -> AxisWeights:
    for array in weights:
        array.flags.writeable = False
    return weights
