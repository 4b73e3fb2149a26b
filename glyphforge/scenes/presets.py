"""Presets: the scene datasets of the literature, under the names the papers use.

Each returns a `ScatteredGlyphs` spec to pass to `glyphforge.build`; every keyword
overrides a field (``moving_mnist(1000, n_frames=10, seed=3)``). The digit presets read
MNIST (EMNIST for the arithmetic ones, whose operators are letters); ``glyphs="font"``
draws the same classes from Pillow's font instead, which needs no data and no network.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from glyphforge.scenes.spec import ScatteredGlyphs

DIGITS = "0123456789"


class Preset(NamedTuple):
    """A preset's function and the fields it sets (the rest keep `ScatteredGlyphs`'s defaults)."""

    function: Callable[..., ScatteredGlyphs]
    fields: dict[str, Any]


#: The presets by the names typed on the command line (``glyphforge build moving-mnist``).
PRESETS: dict[str, Preset] = {}


def _preset(fields: dict[str, Any]) -> Callable[[Callable[..., ScatteredGlyphs]], Callable[..., ScatteredGlyphs]]:
    """Register the decorated preset, which sets ``fields``."""
    def register(function: Callable[..., ScatteredGlyphs]) -> Callable[..., ScatteredGlyphs]:
        PRESETS[function.__name__.replace("_", "-")] = Preset(function, fields)
        return function

    return register


def _spec(n_examples: int, defaults: dict[str, Any], overrides: dict[str, Any]) -> ScatteredGlyphs:
    return ScatteredGlyphs(n_examples, **{**defaults, **overrides})


#: Shards of 100 videos (24.6 MB decoded, as 3,500 still 48x48 scenes): a stream holds whole shards in its windows,
#: and with 1,000 a shuffled epoch read at 0.23-0.37x of still scenes' MB/s in 860 MB (benchmarks/README.md).
MOVING_MNIST = dict(image_shape=(64, 64), glyphs="mnist", characters=DIGITS, glyph_shape=(28, 28), min_glyphs=2,
                    max_glyphs=2, max_overlap=1.0, n_frames=20, patch_speed=3.6, bounce_patches=True, shard_size=100)


@_preset(MOVING_MNIST)
def moving_mnist(n_examples: int, **overrides: Any) -> ScatteredGlyphs:
    """Moving MNIST: 20 frames of 64x64 in which two 28x28 MNIST digits fly and bounce off the edges.

    Srivastava, Mansimov and Salakhutdinov (2015), "Unsupervised Learning of Video
    Representations using LSTMs", ICML: each digit starts at a random place with a random
    direction and moves at a fixed speed, 0.1 of its free range (64 - 28 pixels) per frame,
    reflecting off the walls. Unlike ``torchvision.datasets.MovingMNIST`` (one fixed file of
    10,000 sequences), any number of videos and any seed, with boxes and ids per frame.
    """
    return _spec(n_examples, MOVING_MNIST, overrides)


MULTI_MNIST = dict(image_shape=(50, 50), glyphs="mnist", characters=DIGITS, glyph_shape=(28, 28), min_glyphs=0,
                   max_glyphs=2, max_overlap=1.0)


@_preset(MULTI_MNIST)
def multi_mnist(n_examples: int, **overrides: Any) -> ScatteredGlyphs:
    """Multi-MNIST: 0, 1 or 2 28x28 MNIST digits at random places on 50x50 (they may overlap).

    Eslami et al. (2016), "Attend, Infer, Repeat: Fast Scene Understanding with Generative
    Models", NeurIPS, section 3.1.
    """
    return _spec(n_examples, MULTI_MNIST, overrides)


#: dps's visual arithmetic (e2crawfo/dps, ``dps/datasets/base.py``): the reductions of its
#: ``reductions`` help ("A:sum,M:prod"), its 14x14 patches and the ``largest_digit`` 28 of its example.
VISUAL_ARITHMETIC = dict(image_shape=(48, 48), glyphs="emnist", characters=DIGITS + "AM", glyph_shape=(14, 14),
                         reductions="A:sum,M:prod", min_digits=1, max_digits=3, largest_digit=28)
#: ... on dps's default 2x2 grid, shifted anywhere in the scene.
GRID_ARITHMETIC = dict(VISUAL_ARITHMETIC, grid_shape=(2, 2), random_offset_range=(21, 21))


@_preset(VISUAL_ARITHMETIC)
def visual_arithmetic(n_examples: int, **overrides: Any) -> ScatteredGlyphs:
    """Visual arithmetic: 1 to 3 EMNIST digits and an operator letter scattered on 48x48; the scene's label is
    the sum (operator A) or product (M) of the digits, capped at 28.

    dps's ``VisualArithmeticDataset`` (e2crawfo/dps, ``dps/datasets/base.py``), after Cohen et
    al. (2017), "EMNIST: an extension of MNIST to handwritten letters".
    """
    return _spec(n_examples, VISUAL_ARITHMETIC, overrides)


@_preset(GRID_ARITHMETIC)
def grid_arithmetic(n_examples: int, **overrides: Any) -> ScatteredGlyphs:
    """Grid arithmetic: visual arithmetic on the cells of a 2x2 grid (dps's ``grid_shape`` default), the grid
    shifted anywhere in the 48x48 scene.

    dps's ``GridArithmeticDataset`` (e2crawfo/dps, ``dps/datasets/base.py``).
    """
    return _spec(n_examples, GRID_ARITHMETIC, overrides)


CLUTTERED_MNIST = dict(image_shape=(60, 60), glyphs="mnist", characters=DIGITS, glyph_shape=(28, 28), min_glyphs=1,
                       max_glyphs=1, n_distractors_per_image=4, distractor_shape=(8, 8))


@_preset(CLUTTERED_MNIST)
def cluttered_mnist(n_examples: int, **overrides: Any) -> ScatteredGlyphs:
    """Cluttered translated MNIST: one 28x28 MNIST digit on 60x60 among 4 random 8x8 fragments of other digits.

    Mnih, Heess, Graves and Kavukcuoglu (2014), "Recurrent Models of Visual Attention",
    NeurIPS, section 4.1 (the fragments are clutter: in no box, label or mask).
    """
    return _spec(n_examples, CLUTTERED_MNIST, overrides)
