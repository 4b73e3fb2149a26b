"""A window's shuffle is numpy's ``default_rng([seed, epoch, k]).permutation(size)``, drawn at less cost."""
from __future__ import annotations

import numpy as np
import pytest

from glyphforge.builds.stream.plan import window_permutation


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 1, 2**32, 2**64 - 1])
@pytest.mark.parametrize("epoch", [0, 3, 2**33 + 5])
def test_a_window_shuffle_is_default_rng_of_seed_epoch_and_window(seed: int, epoch: int) -> None:
    # windows of the first chunk mixed at once (1,024), of later ones, the last number of one word, and beyond
    for number in (0, 1, 57, 1023, 1024, 3000, 2**32 - 1, 2**32, 2**40):
        for size in (0, 1, 151):
            expected = np.random.default_rng([seed, epoch, number]).permutation(size)
            drawn = window_permutation(seed, epoch, number, size)
            assert drawn.dtype == expected.dtype and np.array_equal(drawn, expected), (seed, epoch, number, size)
