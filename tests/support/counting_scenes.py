"""Font scenes whose shards record how many numba kernels their process compiled.

Defined in an importable module, not in a test's ``__main__``: dill then sends the class
by reference, so workers call their own imported, cache-enabled kernels.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from glyphforge.scenes.spec import ScatteredGlyphs


def kernel_compiles() -> int:
    """How many kernel specialisations this process compiled (numba cache misses), over glyphforge's kernels."""
    from glyphforge.pipelines import composite, resample_kernel

    kernels = (resample_kernel.resample, composite.composite, composite.place_glyphs, composite.ink_boxes)
    return sum(sum(kernel.stats.cache_misses.values()) for kernel in kernels)


class CountingScenes(ScatteredGlyphs):
    """`ScatteredGlyphs` plus an array ``worker_compiles``: `kernel_compiles` of the process that made the shard."""

    def make_shard(self, index: int, rng: np.random.Generator, n: int, *, data_dir: Any = None) -> dict:
        arrays = super().make_shard(index, rng, n, data_dir=data_dir)
        arrays["worker_compiles"] = np.full(n, kernel_compiles(), np.int64)
        return arrays
