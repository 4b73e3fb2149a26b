"""Argument types shared by the ``glyphforge`` command's parsers, and the scene options put together.

``add_option`` turns a dataset's typed `Option` (`glyphforge.cli.dataset_options`) into an
argparse argument: the one place that does. The scene options live in `glyphforge.scenes.arguments`;
``add_scene_arguments`` adds them with the glyph datasets' own (``--glyph-option``, each dataset's
``build scenes`` options), and ``scene_spec`` gives those to the scenes' spec.
"""
from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
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
            place.backend.check_client()  # opens nothing: checks the store's client is installed
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
    """Add the scene options (`glyphforge.scenes.arguments.add_scene_arguments`) with the glyph datasets' own:
    ``--glyph-option NAME=VALUE`` and each dataset's ``build scenes`` options (``--emnist-split``...)."""
    from glyphforge.scenes.arguments import add_scene_arguments as add_scenes

    def add_glyph_options(parser: argparse.ArgumentParser, option: Callable[..., None]) -> None:
        option("--glyph-option", "a keyword of the glyph dataset (repeatable), e.g. split=letters for EMNIST",
               shown="the dataset's", action="append", dest="glyph_options", type=name_value, metavar="NAME=VALUE")
        for dataset, glyph_option in _scene_options():
            value = "..." if glyph_option.many else glyph_option.metavar or glyph_option.param.upper()
            short = f"short for --glyph-option {glyph_option.param}={value}"
            add_option(parser, glyph_option, _scene_dest(dataset, glyph_option), f"{glyph_option.help} ({short})")

    add_scenes(parser, parse_shape, add_glyph_options, make_spec, preset_fields)


def _scene_options() -> list[tuple[str, Option]]:
    """Each glyph dataset's ``build scenes`` options (``--emnist-split``, ``--omniglot-sets``...), with its dataset."""
    from glyphforge.scenes.glyph_datasets import glyph_datasets

    return [(name, option) for name in glyph_datasets() for option in scene_options(name)]


def _scene_dest(dataset: str, option: Option) -> str:
    return f"glyph_option:{dataset}:{option.param}"


def scene_spec(args: argparse.Namespace) -> Any:
    """Return the spec the parsed scene options describe (`glyphforge.scenes.arguments.scene_spec`), with the glyph
    datasets' own options given."""
    from glyphforge.scenes.arguments import scene_spec as spec

    shorthands: dict[str, dict[str, Any]] = {}
    for dataset, option in _scene_options():
        value = getattr(args, _scene_dest(dataset, option), None)
        if value is not None:
            shorthands.setdefault(dataset, {})[option.param] = value
    return spec(args, shorthands)


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
