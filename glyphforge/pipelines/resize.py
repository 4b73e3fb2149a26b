"""`resize`: resize a batch of images (or one image) with Pillow-exact filters or exact area averaging.

Methods
-------
``"box"``, ``"bilinear"``, ``"lanczos"``
    Equal, pixel for pixel, to Pillow's ``Image.resize`` with ``Image.BOX``,
    ``Image.BILINEAR``, ``Image.LANCZOS`` (Pillow >= 13, which runs the vertical pass
    first when the height shrinks by more than twice as many pixels as the width;
    older Pillow always starts with the horizontal pass). uint8 images follow
    Pillow's 8-bit path: 22-bit fixed-point weights, the intermediate rounded and
    clipped to 0..255. float32 images follow Pillow's ``"F"`` mode: float64 sums, a
    float32 intermediate, no rounding and no clipping (lanczos can overshoot the
    input range); values must be finite (a NaN or inf spreads to its neighbours).
``"area"``
    True area averaging: each output pixel is the mean of the input area it covers,
    partly covered pixels weighted by their coverage. uint8 results are exact
    (integer arithmetic) and rounded half up, float32 results are not rounded. Equal
    to OpenCV's ``INTER_AREA`` when shrinking, except on exact .5 ties, which OpenCV
    rounds half to even unless the factor is exactly 2x2; when enlarging by a
    non-integer factor OpenCV's 11-bit fixed-point weights differ by up to 1.

Which to use: ``"box"`` (the default) to shrink glyphs by a whole factor (28 -> 14)
or wherever results must match Pillow; ``"area"`` to shrink by a non-integer factor
(105 -> 28), where Pillow's BOX is not an average of the covered area (up to 69 grey
levels away from it); ``"lanczos"`` for the sharpest shrinking; ``"bilinear"`` for
smooth enlarging.

Speed: one numba kernel (`glyphforge.pipelines.resample_kernel`) with per-axis
weights computed once per size pair. Batches of more than 65,536 input values run in
parts on a pool of Python threads (one per CPU, or ``$NUMBA_NUM_THREADS``) calling the
GIL-free kernel; smaller ones on the calling thread. Reuse ``out=`` in hot loops.
"""
from __future__ import annotations

import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from glyphforge._checks import check_shape
from glyphforge.pipelines.resample_kernel import Rule, resample
from glyphforge.pipelines.resample_weights import (
    FIXED_POINT_BITS,
    METHODS,
    PILLOW_METHODS,
    AxisWeights,
    Method,
    area_weights,
    pillow_weights,
)

_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))
_UNCHANGED: Rule = (0.0, 1.0, 0.0, 0.0, -math.inf, math.inf)
#: Pillow's 8-bit path: int32 sums of 22-bit fixed-point weights, ``clip((sum + 2**21) >> 22, 0, 255)``.
_FIXED_POINT: Rule = (float(1 << (FIXED_POINT_BITS - 1)), 1.0 / (1 << FIXED_POINT_BITS), 0.0, 1.0, 0.0, 255.0)
#: Exact area sums of uint8 rows are held in float32 between the passes: 255 * side < 2**24.
AREA_UINT8_MAX_SIDE = (1 << 24) // 255
#: Largest buffer of one block of images: below glibc's 128 KiB mmap threshold, so the
#: kernel's per-block buffers are recycled from the heap instead of freshly mapped memory.
_BLOCK_BYTES = 96 * 1024
_MAX_BLOCK = 64
#: Batches up to this many input values run on the calling thread: waking the pool
#: costs more than the work (and much more when another process holds a core).
_SERIAL_PIXELS = 1 << 16
#: Runs of blocks per thread, handed out one at a time so a slowed thread does less.
_PARTS_PER_THREAD = 8
#: Per thread, ``(plan, buffers)`` of the last resize it ran: hot loops of small batches reuse them.
_LAST_BUFFERS = threading.local()


class _Plan(NamedTuple):
    channels: int
    vertical_first: bool
    x: AxisWeights
    y: AxisWeights
    rules: tuple[Rule, Rule]
    between: np.dtype
    block: int

    def kernel_arguments(self, sizes: tuple[int, int, int, int]) -> tuple:
        """The arguments `resample` takes after ``src, dst, start, stop``, before its buffers, for images of ``sizes``.

        ``sizes`` is ``(H, W * C, Ho, Wo * C)``.
        """
        x_pass = (*self.x, self.channels)
        y_pass = (*self.y, 1)
        first, second = (y_pass, x_pass) if self.vertical_first else (x_pass, y_pass)
        first_rule, second_rule = self.rules
        return (*sizes, self.vertical_first, *first, first_rule, *second, second_rule, self.block)

    def buffers(self, sizes: tuple[int, int, int, int]) -> tuple[np.ndarray, ...]:
        """Fresh working memory of one `resample` call (its last four arguments), for images of ``sizes``."""
        height, line_in, out_height, line_out = sizes
        lines1, lines1_out, per1, lines2_out = (
            (height, out_height, line_in, line_out) if self.vertical_first else (line_in, line_out, height, out_height)
        )
        first, second = (self.y, self.x) if self.vertical_first else (self.x, self.y)
        return (
            np.empty(self.block * per1, first.weights.dtype),
            np.empty(self.block * lines1_out, second.weights.dtype),
            np.empty(self.block * per1 * max(lines1, lines1_out), self.between),
            np.empty(self.block * lines1_out * max(per1, lines2_out), self.between),
        )


def resize(
    images: np.ndarray,
    shape: tuple[int, int],
    *,
    method: Method = "box",
    out: np.ndarray | None = None,
    batch: bool | None = None,
) -> np.ndarray:
    """Resize a batch of images, or one image, to ``shape``.

    Parameters
    ----------
    images
        uint8 or float32: a batch ``(N, H, W)`` or ``(N, H, W, C)``, or one image
        ``(H, W)`` or ``(H, W, C)``. A 3-D array is a batch of grey images unless its
        last axis has length 3 (one RGB image); ``batch`` overrides that guess.
    shape
        ``(height, width)`` of the result, positive integers.
    method
        ``"box"`` (default), ``"bilinear"``, ``"lanczos"`` (equal to Pillow) or
        ``"area"`` (exact area averaging); see the module documentation.
    out
        A C-contiguous array of the result's shape and dtype to write into (reusing a
        buffer is much faster than fresh memory for large batches).
    batch
        Whether the first axis of a 3-D ``images`` indexes images.

    Returns
    -------
    numpy.ndarray
        ``out`` if given, else a new array: the input's layout and dtype with
        ``(H, W)`` replaced by ``shape``. Same-size resizing copies.

    Raises
    ------
    ValueError
        For a bad ``images``, ``shape``, ``method``, ``out`` or ``batch``.
    """
    array = _check_images(images)
    height, width = check_shape(shape)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    is_batch, has_channels = _layout(array, batch)
    axis = 1 if is_batch else 0
    result_shape = (*array.shape[:axis], height, width, *array.shape[axis + 2 :])
    result = _check_out(out, result_shape, array) if out is not None else np.empty(result_shape, array.dtype)
    in_height, in_width = array.shape[axis : axis + 2]
    if (in_height, in_width) == (height, width):
        np.copyto(result, array)
        return result
    count = array.shape[0] if is_batch else 1
    channels = array.shape[-1] if has_channels else 1
    if count == 0:
        return result
    plan = _plan(in_height, in_width, height, width, channels, method, array.dtype == np.uint8)
    src = np.ascontiguousarray(array).reshape(-1)
    src.flags.writeable = False  # one compiled kernel for writeable and read-only inputs
    dst = result.reshape(-1)
    sizes = (in_height, in_width * channels, height, width * channels)
    arguments = plan.kernel_arguments(sizes)
    threads = _thread_count()
    if count * in_height * in_width * channels <= _SERIAL_PIXELS or threads == 1:
        resample(src, dst, 0, count, *arguments, *_buffers(plan, sizes))
    else:  # parts handed out one at a time to threads running the GIL-free kernel
        parts = min(-(-count // plan.block), _PARTS_PER_THREAD * threads)
        bounds = [(part * count // parts, (part + 1) * count // parts) for part in range(parts)]
        list(_pool(threads).map(lambda bound: resample(src, dst, *bound, *arguments, *_buffers(plan, sizes)), bounds))
    return result


def _buffers(plan: _Plan, sizes: tuple[int, int, int, int]) -> tuple[np.ndarray, ...]:
    """This thread's working memory for `resample` with ``plan`` (which fixes ``sizes``): the last one, if its plan."""
    last = getattr(_LAST_BUFFERS, "held", None)
    if last is None or last[0] is not plan:
        last = _LAST_BUFFERS.held = (plan, plan.buffers(sizes))
    return last[1]


def _thread_count() -> int:
    """Threads for a large batch: ``$NUMBA_NUM_THREADS`` when set (numba's own knob), else the CPU count."""
    configured: int = getattr(numba.config, "NUMBA_NUM_THREADS", 0)  # set by numba at import (not in its stubs)
    return max(1, configured or os.cpu_count() or 1)


@functools.lru_cache(maxsize=4)
def _pool(threads: int) -> ThreadPoolExecutor:
    """A thread pool kept for the process (threads that wait cost nothing)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="glyphforge-resize")


def _check_images(images: np.ndarray) -> np.ndarray:
    array = np.asarray(images)
    if array.dtype not in _DTYPES:
        raise ValueError(
            f"images must be uint8 or float32, got dtype {array.dtype} "
            "(convert with .astype(np.uint8) or .astype(np.float32))"
        )
    if array.ndim not in (2, 3, 4):
        raise ValueError(
            "images must be (N, H, W), (N, H, W, C), (H, W) or (H, W, C), "
            f"got an array of shape {array.shape}"
        )
    return array


def _layout(array: np.ndarray, batch: bool | None) -> tuple[bool, bool]:
    """Return ``(is_batch, has_channels)`` of ``array`` and check its size."""
    if batch not in (None, True, False):
        raise ValueError(f"batch must be None, True or False, got {batch!r}")
    guesses = {2: (False, False), 4: (True, True)}
    if array.ndim == 3:
        is_batch = array.shape[-1] != 3 if batch is None else batch
        layout = (is_batch, not is_batch)
    elif batch is not None and batch != guesses[array.ndim][0]:
        raise ValueError(f"batch={batch} contradicts images of shape {array.shape}")
    else:
        layout = guesses[array.ndim]
    axis = 1 if layout[0] else 0
    if min(array.shape[axis : axis + 2]) < 1 or (layout[1] and array.shape[-1] < 1):
        raise ValueError(f"images must be at least 1x1 pixels with 1 channel, got shape {array.shape}")
    return layout


def _check_out(out: np.ndarray, shape: tuple[int, ...], images: np.ndarray) -> np.ndarray:
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != images.dtype:
        described = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"out must be a {images.dtype} array of shape {shape}, got {described}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous array")
    if np.may_share_memory(out, images):
        raise ValueError("out must not overlap images")
    return out


@functools.lru_cache(maxsize=256)
def _plan(in_height: int, in_width: int, height: int, width: int, channels: int, method: str, is_uint8: bool) -> _Plan:
    """Weights, pass order, settle rules and block size of one resize."""
    vertical_first = height < in_height and in_height - height > 2 * (in_width - width)
    if method in PILLOW_METHODS:
        x = pillow_weights(in_width, width, method, fixed_point=is_uint8)
        y = pillow_weights(in_height, height, method, fixed_point=is_uint8)
        rules = (_FIXED_POINT, _FIXED_POINT) if is_uint8 else (_UNCHANGED, _UNCHANGED)
        between = np.dtype(np.uint8 if is_uint8 else np.float32)
    else:
        x = area_weights(in_width, width, exact=is_uint8)
        y = area_weights(in_height, height, exact=is_uint8)
        between = np.dtype(np.float32)
        if not is_uint8:
            rules = (_UNCHANGED, _UNCHANGED)
        elif max(in_height, in_width) > AREA_UINT8_MAX_SIDE:
            raise ValueError(
                f"method='area' on uint8 images takes at most {AREA_UINT8_MAX_SIDE} pixels per side, "
                f"got {in_height}x{in_width} (resize in two steps, or use float32)"
            )
        else:  # integer overlaps sum to in_size per axis: the mean is sum / area, rounded half up
            area = float(in_height * in_width)
            rules = (_UNCHANGED, (area / 2, area, 1.0, 1.0, 0.0, 255.0))
    largest = max(in_height * in_width, height * width, in_height * width, height * in_width) * channels
    block = max(1, min(_MAX_BLOCK, _BLOCK_BYTES // (largest * x.weights.itemsize)))
    return _Plan(channels, vertical_first, x, y, rules, between, block)
