"""The command-line options of the scene parts (layout, distractors, task, motion, masks).

``glyphforge build scenes`` and the preset commands (``glyphforge build moving-mnist``)
add them through `add_part_arguments`, beside the options of scattered glyphs; each is
named after its `ScatteredGlyphs` field (``--grid-shape`` for ``grid_shape``) and, when
not given, leaves the field at the spec's (or the preset's) default.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

#: ``option(flag, help, **argparse settings)``: adds an option whose default is the spec's own.
AddOption = Callable[..., None]


def pair(text: str) -> tuple[int, int]:
    """Parse ``'2x3'`` or ``'2,3'`` into ``(2, 3)``: two integers, zero allowed (argparse type)."""
    parts = text.replace(",", "x").lower().split("x")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or min(values) < 0:
        raise argparse.ArgumentTypeError(f"give two integers >= 0 as AxB, e.g. 2x3; got {text!r}")
    return values[0], values[1]


def add_part_arguments(option: AddOption, shape: Callable[[str], tuple[int, int]]) -> None:
    """Add the options of the scene parts through ``option``; ``shape`` parses a positive ``HxW``."""
    option("--draw-shape", "the window objects are placed in (default: the whole image)", shown="image",
           type=shape, metavar="HxW")
    option("--draw-offset", "the draw window's top-left corner", type=pair, metavar="TOPxLEFT")
    option("--grid-shape", "place objects on distinct cells of a ROWSxCOLS grid instead of scattering them",
           shown="scattered", type=shape, metavar="ROWSxCOLS")
    option("--spacing", "pixels between the grid's cells", type=pair, metavar="DYxDX")
    option("--random-offset-range", "shift each scene's grid by up to this, minus 1", shown="none", type=shape,
           metavar="DYxDX")
    option("--n-distractors-per-image", "unannotated clutter: random crops of other objects per scene", type=int)
    option("--distractor-shape", "the size of each distractor crop", type=shape, metavar="HxW")
    option("--reductions", "a scene label: sum, prod, max, min or count of the digits, or operator classes mapped "
           "to them, e.g. A:sum,M:prod", shown="none")
    option("--min-digits", "fewest digits in a scene with --reductions", type=int)
    option("--max-digits", "most digits in a scene with --reductions", type=int)
    option("--largest-digit", "cap of the scene label", shown="none", type=int)
    option("--n-frames", "frames per video (0: still scenes)", type=int)
    option("--patch-speed", "pixels per frame each object moves", type=float)
    option("--bounce-patches", "objects bounce off the frame's walls (--no-bounce-patches: they may leave it)",
           action=argparse.BooleanOptionalAction)
    option("--appearance-prob", "per frame, the chance a hidden object appears", type=float)
    option("--disappearance-prob", "per frame, the chance a shown object disappears for good", type=float)
    option("--masks", "add per-pixel instance masks", action="store_true")


def preset_commands() -> dict[str, tuple[Callable[..., Any], dict[str, Any], str]]:
    """The preset commands: ``{name: (function, the fields it sets, its docstring's first line)}``."""
    from glyphforge.scenes.presets import PRESETS

    return {name: (function, fields, (function.__doc__ or "").strip().splitlines()[0])
            for name, (function, fields) in PRESETS.items()}
