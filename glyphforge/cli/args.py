"""Argument types and the scene options shared by the ``glyphforge`` command's parsers.

``add_option`` turns a dataset's typed `Option` (`glyphforge.cli.dataset_options`) into an
argparse argument: the one place that does. ``add_scene_arguments`` adds every
`ScatteredGlyphs` field as an option whose default is the spec's own (shown in ``--help``;
an option not given is not passed), plus each glyph dataset's ``build scenes`` options, and
``scene_spec`` turns the parsed options into the spec.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

from glyphforge import _files, config
from glyphforge._access import DataDirAccessError, check_data_dir_access
from glyphforge._checks import check_shape
from glyphforge.cli.dataset_options import Option, scene_options
from glyphforge.errors import ArgumentError
from glyphforge.pipelines.sources import check_mirror
from glyphforge.storage import Location, UnsupportedURLError, parse_place


def parse_shape(text: str) -> tuple[int, int]:
    """Parse ``'14x14'`` or ``'14,14'`` into ``(14, 14)`` (argparse type); sides up to `glyphforge._checks.MAX_SIDE`."""
    parts = text.replace(",", "x").lower().split("x")
    try:
        shape = tuple(int(part) for part in parts)
    except ValueError:
        shape = ()
    if len(shape) != 2 or min(shape) <= 0:
        raise argparse.ArgumentTypeError(f"shape must be HEIGHTxWIDTH with positive integers, e.g. 14x14; got {text!r}")
    try:
        return check_shape(shape)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def existing_file(text: str, what: str = "the file") -> Path:
    """Parse the path of a file that must exist (argparse type); a directory or a missing path is refused."""
    try:
        return _files.existing_file(text, what)
    except OSError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def output_path(text: str) -> Path:
    """Parse a path a command writes to (argparse type): refused when this system could not make it (too long)."""
    path = Path(text).expanduser()
    too_long = _files.path_too_long(path)
    if too_long:
        raise argparse.ArgumentTypeError(f"{_files.shown_path(path)} cannot be written: {too_long} (ENAMETOOLONG); "
                                         "give a shorter path")
    return path


class UsageError(ArgumentError, ValueError):
    """Bad arguments found before any work: exit status 2, like argparse's own errors."""


def data_directory(text: str) -> Path | str:
    """Parse ``--data-dir`` (argparse type): a directory that exists or can be made, on a real disk, or a URL.

    See `checked_data_dir`; a bad one is an argparse error (exit status 2).
    """
    try:
        return checked_data_dir(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def check_env_settings(env_data_dir: bool = True) -> None:
    """Check the ``GLYPHFORGE_*`` settings of the environment before a command does any work; unset or empty pass.

    ``$GLYPHFORGE_DATA_DIR`` (when ``env_data_dir``: no ``--data-dir`` was given) as ``--data-dir`` is
    checked (`checked_data_dir`); ``$GLYPHFORGE_MIRROR`` as
    ``--mirror`` (`mirror`); the sizes and ``$GLYPHFORGE_LOCK_TIMEOUT`` as the library reads them
    (`glyphforge.config`'s settings).

    Raises
    ------
    UsageError
        Naming the variable, what is wrong with its value and what to do.
    """
    text = config.data_dir_setting()
    if text and env_data_dir:
        try:
            checked_data_dir(str(text), fix=f"set ${config.ENV_DATA_DIR} to a directory (it is made if missing), or "
                                       "give --data-dir, or unset it for the user data dir")
        except UsageError as error:
            raise UsageError(f"${config.ENV_DATA_DIR}: {error}") from None
    for base in config.mirror_setting():
        try:
            check_mirror(base)
        except UnsupportedURLError as error:
            raise UsageError(f"${config.ENV_MIRROR}: {error}") from None
    try:
        config.decoded_budget_setting()
        config.cache_size_setting()
        config.lock_timeout()
    except ValueError as error:
        raise UsageError(str(error)) from None


def mirror(text: str) -> str:
    """Parse ``--mirror`` (argparse type): a directory or a URL a file can come from (`check_mirror`)."""
    try:
        check_mirror(text)
    except UnsupportedURLError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def checked_data_dir(
    text: str, fix: str = "give a directory (it is made if missing), or leave --data-dir out",
) -> Path | str:
    """Return the data dir ``text`` once it can be used: a directory that exists or can be made, or a URL.

    Refuses an empty path (which would silently mean the current directory), a directory this
    user may not enter or read, or one inside a folder they may not enter (`check_data_dir_access`),
    a file (or a path below one), a directory on a file system without storage (``/proc``, ``/sys``),
    and a missing directory whose nearest existing parent is not writable. An existing
    directory that is read-only is accepted: a shared data dir may be read by its users.
    A URL (``s3://bucket/data``) is returned once it is supported and well formed and fsspec
    can open its scheme here (`glyphforge.storage.Location`); the commands that work with one
    say so. A ``file://`` URL is the path it names (`glyphforge.storage.parse_place`), checked
    and returned as that path.

    Parameters
    ----------
    text
        The data dir as given.
    fix
        What to do instead, the end of each message (``--data-dir``'s by default).

    Raises
    ------
    UsageError
        Saying what is wrong and ``fix``.
    """
    try:
        place = parse_place(text)  # a file:// URL is its path, checked as one below
        if isinstance(place, Location):
            place.fs  # noqa: B018 (opens nothing: checks the scheme's filesystem is installed)
            return place.url
    except UnsupportedURLError as error:
        raise UsageError(str(error)) from None
    if not text.strip():
        raise UsageError(f"the data dir is empty ({text!r}), which would mean the current directory: {fix}")
    path = place.expanduser()
    too_long = _files.path_too_long(path)
    if too_long:
        raise UsageError(f"the data dir {_files.shown_path(path)} cannot be used: {too_long} (ENAMETOOLONG): {fix}")
    try:
        check_data_dir_access(path, instead=fix)
    except DataDirAccessError as error:
        raise UsageError(str(error)) from None
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        what = "is a file" if existing == path else f"is below {existing}, which is a file"
        raise UsageError(f"the data dir {path} {what}, not a directory: {fix}")
    if hasattr(os, "statvfs") and os.statvfs(existing).f_blocks == 0:  # POSIX only; Windows has no /proc
        raise UsageError(
            f"the data dir {path} is on a system file system that cannot hold files ({existing}, like /proc and "
            f"/sys): {fix}"
        )
    why = _files.unwritable(existing) if existing != path else None
    if why:
        raise UsageError(f"the data dir {path} does not exist and cannot be made in {existing}: {why}; {fix}")
    return path


def positive(text: str) -> int:
    """Parse a positive integer (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"give a positive integer, e.g. 16; got {text!r}")
    return value


def fraction_range(text: str) -> tuple[float, float]:
    """Parse ``'0,0.8'`` into ``(0.0, 0.8)`` (argparse type)."""
    try:
        first, stop = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"give two fractions separated by a comma, e.g. 0,0.8; got {text!r}") from None
    return first, stop


def names(text: str) -> list[str]:
    """Split a list given as one argument: by commas, or by spaces."""
    return [name for name in text.replace(",", " ").split() if name]


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, option: Option, dest: str,
    help_text: str | None = None,
) -> None:
    """Add ``option`` to ``parser`` as an argument stored as ``dest`` (None when not given).

    ``help_text`` replaces the option's ``help`` (scenes add what the option is short for).

    Each value is read as the option's ``value`` kind, then given to its ``convert``; a
    bad value is an argparse error (exit status 2, before any work).
    """
    shown = f" (default: {option.default})" if option.default is not None else ""
    parser.add_argument(
        option.flag, dest=dest, default=None, help=f"{help_text or option.help}{shown}",
        type=functools.partial(option_value, option),
        choices=option.choices, metavar=option.metavar or (None if option.choices else option.param.upper()),
        nargs="+" if option.many else None, action="append" if option.repeatable else "store",
    )


def option_value(option: Option, text: str) -> Any:
    """Read one command-line value of ``option``: its ``value`` kind, then its ``convert`` (argparse type)."""
    if option.value is int:
        try:
            value: Any = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"give an integer, e.g. 4; got {text!r}") from None
    else:
        value = Path(text).expanduser() if option.value == "path" else text
    if option.convert is None:
        return value
    try:
        return option.convert(value)
    except (ValueError, OSError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_scene_arguments(parser: argparse.ArgumentParser, make_spec: Any = None,
                        preset_fields: dict[str, Any] | None = None) -> None:
    """The options of `ScatteredGlyphs`; an option not given keeps the spec's default (shown in --help).

    ``make_spec(n_examples, **fields)`` makes the spec (`scene_spec`): ``ScatteredGlyphs``, or a
    preset (`glyphforge.scenes.presets`), whose ``preset_fields`` --help then shows as the defaults.
    """
    from glyphforge.scenes.arguments import add_part_arguments
    from glyphforge.scenes.sources import glyph_sources
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
    option("--image-shape", "scene size", type=parse_shape, metavar="HxW")
    option("--glyphs", "glyph source", choices=glyph_sources())
    option("--characters", "characters as one string (EMNIST, MNIST, font: e.g. 0123456789), class names separated "
           "by commas (e.g. 'T-shirt/top,Ankle boot'), or Omniglot classes separated by spaces (e.g. 'Latin,1 "
           "Latin,2')", shown="all")
    option("--glyph-option", "a keyword of the glyph dataset (repeatable), e.g. split=letters for EMNIST",
           shown="the dataset's", action="append", dest="glyph_options", type=name_value, metavar="NAME=VALUE")
    for dataset, glyph_option in _scene_options():
        value = "..." if glyph_option.many else glyph_option.metavar or glyph_option.param.upper()
        short = f"short for --glyph-option {glyph_option.param}={value}"
        add_option(parser, glyph_option, _scene_dest(dataset, glyph_option), f"{glyph_option.help} ({short})")
    option("--glyph-shape", "glyph size", type=parse_shape, metavar="HxW")
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
    add_part_arguments(option, parse_shape)
    option("--seed", "seed of every random choice", type=int)
    option("--shard-size", "scenes per shard", type=int)


def _scene_options() -> list[tuple[str, Option]]:
    """Each glyph dataset's ``build scenes`` options (``--emnist-split``, ``--omniglot-sets``...), with its dataset."""
    from glyphforge.scenes.glyph_datasets import glyph_datasets

    return [(name, option) for name in glyph_datasets() for option in scene_options(name)]


def _scene_dest(dataset: str, option: Option) -> str:
    return f"glyph_option:{dataset}:{option.param}"


def scene_spec(args: argparse.Namespace) -> Any:
    """Return the `ScatteredGlyphs` the parsed options describe (the options not given keep its defaults)."""
    from glyphforge.scenes.spec import ScatteredGlyphs

    fields = {spec_field.name for spec_field in dataclasses.fields(ScatteredGlyphs)}
    given = {name: value for name, value in vars(args).items() if name in fields}
    glyphs = given.get("glyphs", args.default_glyphs)
    options = dict(given.pop("glyph_options", []))
    for dataset, option in _scene_options():
        value = getattr(args, _scene_dest(dataset, option), None)
        if value is not None and glyphs == dataset:  # a shorthand applies to its own dataset only
            options.setdefault(option.param, value)
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


def name_value(text: str) -> tuple[str, Any]:
    """Parse ``'memory=16GB'`` or ``'cores=4'`` into ``('memory', '16GB')`` / ``('cores', 4)`` (argparse type)."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"give NAME=VALUE, e.g. cores=4 or memory=16GB; got {text!r}")
    for convert in (int, float):
        try:
            return name, convert(value)
        except ValueError:
            continue
    return name, value
