"""The command-line options of scenes: every `ScatteredGlyphs` field, and the spec the parsed options describe.

``glyphforge build scenes`` and the preset commands (``glyphforge build moving-mnist``) add
them through `add_scene_arguments` (the scene parts' own through `add_part_arguments`); each
is named after its `ScatteredGlyphs` field (``--grid-shape`` for ``grid_shape``) and, when not
given, leaves the field at the spec's (or the preset's) default; `scene_spec` turns the parsed
options into the spec. The command line (`glyphforge.cli.args`) assembles them: it gives the
shape type and adds the glyph datasets' options (``--glyph-option``, ``--emnist-split``...).
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
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


def names(text: str) -> list[str]:
    """Split a list given as one argument: by commas, or by spaces."""
    return [name for name in text.replace(",", " ").split() if name]


def fraction_range(text: str) -> tuple[float, float]:
    """Parse ``'0,0.8'`` into ``(0.0, 0.8)`` (argparse type)."""
    try:
        first, stop = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"give two fractions separated by a comma, e.g. 0,0.8; got {text!r}") from None
    return first, stop


def add_scene_arguments(
    parser: argparse.ArgumentParser, shape: Callable[[str], tuple[int, int]],
    add_glyph_options: Callable[[argparse.ArgumentParser, AddOption], None], make_spec: Any = None,
    preset_fields: dict[str, Any] | None = None,
) -> None:
    """Add the options of `ScatteredGlyphs`; an option not given keeps the spec's default (shown in --help).

    ``shape`` parses a positive ``HxW``; ``add_glyph_options(parser, option)`` adds the glyph
    datasets' options after ``--characters``. ``make_spec(n_examples, **fields)`` makes the spec
    (`scene_spec`): ``ScatteredGlyphs``, or a preset (`glyphforge.scenes.presets`), whose
    ``preset_fields`` --help then shows as the defaults.
    """
    from glyphforge.scenes.sources import glyph_sources  # here: the command line starts without the scenes' spec
    from glyphforge.scenes.spec import ScatteredGlyphs

    defaults = {spec_field.name: spec_field.default for spec_field in dataclasses.fields(ScatteredGlyphs)}
    defaults.update(preset_fields or {})
    parser.set_defaults(make_spec=make_spec or ScatteredGlyphs, default_glyphs=defaults["glyphs"])

    def option(flag: str, help_text: str, shown: Any = None, **settings: Any) -> None:
        default = defaults.get(flag[2:].replace("-", "_")) if shown is None else shown
        if isinstance(default, tuple) and len(default) == 2 and all(isinstance(side, int) for side in default):
            default = "x".join(map(str, default))  # a shape, as it is typed
        parser.add_argument(flag, default=argparse.SUPPRESS, help=f"{help_text} (default: {default})", **settings)

    parser.add_argument("--n-examples", type=int, default=10_000, help="number of scenes (default: 10000)")
    option("--image-shape", "scene size", type=shape, metavar="HxW")
    option("--glyphs", "glyph source", choices=glyph_sources())
    option("--characters", "characters as one string (EMNIST, MNIST, font: e.g. 0123456789), class names separated "
           "by commas (e.g. 'T-shirt/top,Ankle boot'), or Omniglot classes separated by spaces (e.g. 'Latin,1 "
           "Latin,2')", shown="all")
    add_glyph_options(parser, option)
    option("--glyph-shape", "glyph size", type=shape, metavar="HxW")
    option("--glyph-shape-jitter", "vary each glyph's size by up to this fraction, e.g. 0.2", type=float)
    option("--glyph-example-range", "use only the fraction [A, B) of each class's images, e.g. 0,0.8 for "
           "training scenes", type=fraction_range, metavar="A,B")
    option("--min-glyphs", "fewest glyphs in a scene", type=int)
    option("--max-glyphs", "most glyphs in a scene", type=int)
    option("--max-overlap", "largest allowed box overlap, as a fraction of a box", type=float)
    option("--backgrounds", "none (black), all, hard, or background names separated by commas", shown="none")
    option("--background-colours", "flat background colours to mix in, separated by commas (e.g. navy,#203040)",
           shown="none", type=names, metavar="COLOURS")
    option("--colours", "glyph colours, separated by commas", shown="white", type=names, metavar="COLOURS")
    add_part_arguments(option, shape)
    option("--seed", "seed of every random choice", type=int)
    option("--shard-size", "scenes per shard", type=int)


def scene_spec(args: argparse.Namespace, shorthands: Mapping[str, Mapping[str, Any]]) -> Any:
    """Return the spec the parsed options describe (the options not given keep its defaults).

    ``shorthands``: ``{glyph dataset: {keyword: value}}``, the glyph datasets' own options given
    (``--emnist-split letters``); only the chosen dataset's apply, under ``--glyph-option``'s.
    """
    from glyphforge.scenes.spec import ScatteredGlyphs

    fields = {spec_field.name for spec_field in dataclasses.fields(ScatteredGlyphs)}
    given = {name: value for name, value in vars(args).items() if name in fields}
    glyphs = given.get("glyphs", args.default_glyphs)
    options = dict(given.pop("glyph_options", []))
    for param, value in shorthands.get(glyphs, {}).items():  # a shorthand applies to its own dataset only
        options.setdefault(param, value)
    if options:
        given["glyph_options"] = options
    if "characters" in given and glyphs == "omniglot":  # Omniglot's names hold commas: separated by spaces
        given["characters"] = given["characters"].split()
    elif "characters" in given and "," in given["characters"]:  # names such as Fashion-MNIST's, by commas
        given["characters"] = [name.strip() for name in given["characters"].split(",") if name.strip()]
    backgrounds = given.get("backgrounds")
    if backgrounds is not None and backgrounds.lower() == "none":
        given["backgrounds"] = None
    elif backgrounds not in (None, "all", "hard"):
        given["backgrounds"] = names(backgrounds)
    for name in ("colours", "background_colours"):
        if name in given:
            given[name] = tuple(given[name])
    return args.make_spec(args.n_examples, **{name: value for name, value in given.items() if name != "n_examples"})


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
    option("--colour-labels", "add the colours array: each object's index into --colours", action="store_true")
    option("--attribute-task", "a scene label from the objects' attributes: 'set' (do some three form a set in "
           "class, colour and size?) or 'above:COLOUR CLASS,COLOUR CLASS' (is the first above the second?)",
           shown="none")
    option("--postprocessing", "cut each scene into crops, each an example: tile (a grid), tile_pad (a grid, the "
           "scene padded) or random", shown="none: whole scenes", choices=("tile", "tile_pad", "random"))
    option("--tile-shape", "the size of each crop", shown="none", type=shape, metavar="HxW")
    option("--n-samples-per-image", "random crops per scene (--postprocessing random)", type=int)


def preset_commands() -> dict[str, tuple[Callable[..., Any], dict[str, Any], str]]:
    """The preset commands: ``{name: (function, the fields it sets, its docstring's first line)}``."""
    from glyphforge.scenes.presets import PRESETS

    return {name: (function, fields, (function.__doc__ or "").strip().splitlines()[0])
            for name, (function, fields) in PRESETS.items()}
