"""Intensity helpers for the converters: `invert` and `to_grey` on uint8 images.

Omniglot draws black strokes on white; glyphforge stores glyphs white on black
(intensity = ink), so Omniglot images are inverted once when converted.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from glyphforge.pipelines.numba_threads import prefer_passive_waiting

prefer_passive_waiting()

# Pillow's RGB -> "L" conversion: ITU-R 601-2 luma in 16-bit fixed point, rounded.
_RED, _GREEN, _BLUE, _HALF, _SHIFT = 19595, 38470, 7471, 1 << 15, 16


def invert(images: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """Return ``255 - images`` (black on white <-> white on black).

    Parameters
    ----------
    images
        uint8 array of any shape.
    out
        uint8 array of the same shape to write into; may be ``images`` itself.

    Returns
    -------
    numpy.ndarray
        ``out`` if given, else a new array.
    """
    array = _check_uint8(images, "images")
    if out is not None:
        _check_out(out, array.shape)
    return np.subtract(np.uint8(255), array, out=out)


def to_grey(images: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """Convert RGB to grey exactly as Pillow's ``Image.convert("L")`` does.

    Parameters
    ----------
    images
        uint8 array ``(..., 3)``: one RGB image or a batch of them.
    out
        uint8 array ``images.shape[:-1]`` to write into.

    Returns
    -------
    numpy.ndarray
        ``(R * 19595 + G * 38470 + B * 7471 + 2**15) >> 16`` per pixel, shape
        ``images.shape[:-1]``; ``out`` if given.
    """
    array = _check_uint8(images, "images")
    if array.ndim < 1 or array.shape[-1] != 3:
        raise ValueError(f"images must end with an RGB axis of length 3, got shape {array.shape}")
    result = np.empty(array.shape[:-1], np.uint8) if out is None else _check_out(out, array.shape[:-1])
    if not result.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    _luma(np.ascontiguousarray(array).reshape(-1, 3), result.reshape(-1))
    return result


@njit(parallel=True, cache=True)
def _luma(rgb: np.ndarray, grey: np.ndarray) -> None:
    for i in prange(grey.shape[0]):
        red, green, blue = np.uint32(rgb[i, 0]), np.uint32(rgb[i, 1]), np.uint32(rgb[i, 2])
        grey[i] = (red * _RED + green * _GREEN + blue * _BLUE + _HALF) >> _SHIFT


def _check_uint8(images: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(images)
    if array.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8, got dtype {array.dtype}")
    return array


def _check_out(out: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.shape != shape:
        described = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"out must be a uint8 array of shape {shape}, got {described}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    return out
