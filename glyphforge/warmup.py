"""Compile every numba kernel glyphforge has, once, so later commands start at full speed.

``glyphforge warmup`` (also run at the end of ``prepare-data``, in well under a second
when already warm) calls each kernel on tiny inputs of the exact types real calls use,
so numba compiles it, or loads it from its on-disk cache (see
`glyphforge.pipelines.numba_cache`). Cluster images and job prologues run it once; every
later process of that machine (or of every machine sharing the cache dir) loads the
kernels instead of compiling them.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

#: What `warmup` compiles: one call per kernel specialisation that glyphforge's commands use.
KERNEL_CALLS: tuple[tuple[str, str], ...] = (
    ("resize uint8 box/bilinear/lanczos", "uint8 images, Pillow's 8-bit fixed point"),
    ("resize uint8 area", "uint8 images, exact area sums"),
    ("resize float32 (every method)", "float32 images"),
    ("scene layout and compositing", "ScatteredGlyphs shards"),
)


def _calls() -> list[Callable[[], object]]:
    from glyphforge.builds.scenes import ScatteredGlyphs
    from glyphforge.pipelines.resize import resize

    grey = np.zeros((1, 4, 4), np.uint8)
    scene = ScatteredGlyphs(2, glyphs="font", characters="AB", image_shape=(16, 16), glyph_shape=(6, 6),
                            background_colours=["black"], shard_size=2)
    return [
        lambda: resize(grey, (2, 2), method="box"),
        lambda: resize(grey, (3, 3), method="area"),
        lambda: resize(grey.astype(np.float32), (2, 2), method="box"),
        lambda: scene.make_shard(0, np.random.default_rng(0), 2),
    ]


def warmup() -> list[tuple[str, float]]:
    """Compile (or load from numba's cache) every glyphforge kernel; return ``(kernel, seconds)`` for each."""
    timings = []
    for (name, _), call in zip(KERNEL_CALLS, _calls(), strict=True):
        started = time.perf_counter()
        call()
        timings.append((name, time.perf_counter() - started))
    return timings


def cache_location() -> str:
    """Where numba keeps the compiled kernels (its ``CACHE_DIR``, or the package's ``__pycache__``)."""
    import numba

    from glyphforge.pipelines import numba_cache

    chosen: str = getattr(numba.config, "CACHE_DIR", "")  # set by numba at import (not in its stubs)
    return chosen or f"{numba_cache.PACKAGE_CACHE} (beside the kernels)"
