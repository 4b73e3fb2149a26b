"""The command-line options of each dataset: ``prepare-data``'s and ``glyphforge build scenes``' (typed `Option` s).

A per-class dataset with several configs (a `~glyphforge.datasets.classes.declaration.Declaration`
with a ``config_option``: EMNIST's ``split``) gets its options from its declaration:
``prepare-data``'s ``--split`` (repeatable) and ``build scenes``' ``--emnist-split`` (short for
``--glyph-option split=SPLIT``). Any other option is registered here (`register_options`),
glyphforge's own in :data:`PREPARE` and :data:`SCENES`. An option is typed and knows nothing of
argparse: `glyphforge.cli.args.add_option` turns it into an argument.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from glyphforge._checks import worker_count
from glyphforge.datasets import registry

#: What one command-line value of an `Option` is: text, an integer, or a path (``~`` expanded).
ValueKind = type[str] | type[int] | Literal["path"]


@dataclass(frozen=True)
class Option:
    """One command-line option of a dataset: its flag, the keyword it fills, and how its value is read.

    Parameters
    ----------
    flag
        The flag, e.g. ``"--emnist-archive"``.
    param
        The keyword of the dataset's ``prepare`` (or, for ``build scenes``, the glyph option) it fills.
    help
        One line for ``--help``.
    value
        ``str``, ``int`` or ``"path"``: how each value given is read.
    many
        The flag takes one or more values (``--omniglot-sets small1 small2``): a list.
    repeatable
        The flag may be given several times (``--split byclass --split letters``): a list.
    choices
        The values allowed, when they are few and fixed.
    metavar
        The value's name in ``--help`` (default: ``param`` in capitals).
    default
        What the dataset does when the flag is not given, shown in ``--help`` only (nothing is passed then).
    convert
        A named module-level function applied to each value read (``path -> {"gzip.zip": path}``);
        a ValueError or OSError it raises is a usage error (exit status 2, before any work).
    """

    flag: str
    param: str
    help: str
    value: ValueKind = str
    many: bool = False
    repeatable: bool = False
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    default: str | None = None
    convert: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.convert is not None and not _is_named_function(self.convert):
            raise ValueError(f"option {self.flag}: convert={self.convert!r} must be a named module-level "
                             "function (a record is a declaration: define the function beside it and name it)")
        if not re.fullmatch(r"--[a-z0-9][a-z0-9-]*", self.flag) or not self.param.isidentifier():
            raise ValueError(f"option {self.flag!r} fills {self.param!r}: give a flag such as '--emnist-split' and "
                             "the keyword it fills, a Python identifier such as 'split'")
        if self.value not in (str, int, "path"):
            raise ValueError(f"option {self.flag}: value must be str, int or 'path', got {self.value!r}")
        if self.many and self.repeatable:
            raise ValueError(f"option {self.flag}: give many=True (one flag, several values) or repeatable=True "
                             "(the flag given several times), not both")
        if self.choices is not None and (self.convert is not None or self.value is not str):
            raise ValueError(f"option {self.flag}: choices are for text values without a converter (a converter "
                             "refuses bad values itself)")


def _is_named_function(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is defined at the top level of its module (not a lambda, not nested, not a partial)."""
    name = getattr(function, "__name__", None)
    return name not in (None, "<lambda>") and getattr(function, "__qualname__", None) == name


def emnist_archive(path: Path) -> dict[str, Path]:
    """``--emnist-archive PATH``: ``archives={"gzip.zip": path}`` for a file that exists."""
    from glyphforge._files import existing_file

    return {"gzip.zip": existing_file(path, "a copy of NIST's gzip.zip")}


#: The ``prepare-data`` options not read from a declaration, by dataset; each fills a ``prepare`` keyword.
PREPARE: dict[str, tuple[Option, ...]] = {
    "emnist": (
        Option("--emnist-archive", "archives", "convert this local copy of NIST's gzip.zip instead of fetching it",
               value="path", metavar="ZIP", convert=emnist_archive),
    ),
    "omniglot": (
        Option("--omniglot-sets", "sets", "Omniglot sets: background evaluation small1 small2", many=True,
               metavar="SET", default="background evaluation"),
        Option("--workers", "workers", "processes for decoding Omniglot", value=int, metavar="N",
               default="one per CPU for sets of 10,000 images or more, else none", convert=worker_count),
    ),
    "backgrounds": (
        Option("--backgrounds", "names", "backgrounds to fetch: all, hard (the .jpg textures) or names "
               "such as water ice", many=True, metavar="NAME", default="all"),
    ),
}
#: The ``glyphforge build scenes`` options not read from a declaration, by glyph dataset; each fills a glyph option.
SCENES: dict[str, tuple[Option, ...]] = {
    "omniglot": (Option("--omniglot-sets", "sets", "Omniglot sets the glyphs come from", many=True, metavar="SET",
                        default="background evaluation"),),
}


def register_options(
    dataset: str, *, prepare: tuple[Option, ...] = (), scenes: tuple[Option, ...] = (),
) -> None:
    """Give the registered dataset ``dataset`` the ``prepare-data`` options ``prepare`` and the ``build scenes``
    options ``scenes`` (replacing those it had).

    Raises
    ------
    KeyError
        ``dataset`` is not registered (register its record first).
    ValueError
        A flag is already another dataset's.
    """
    others = [name for name in registry.registered() if name != dataset]
    registry.refuse_clash(dataset, "prepare-data option", _flags(prepare),
                          {other: _flags(prepare_options(other)) for other in others})
    registry.refuse_clash(dataset, "build scenes option", _flags(scenes),
                          {other: _flags(scene_options(other)) for other in others})
    record = registry.get(dataset)
    PREPARE[dataset], SCENES[dataset] = prepare, scenes
    _REGISTERED_FOR[dataset] = record


#: The record each run-time registration was made for: it ends when that record is replaced or unregistered.
_REGISTERED_FOR: dict[str, registry.DatasetRecord] = {}


def _own(table: Mapping[str, tuple[Option, ...]], dataset: str) -> tuple[Option, ...]:
    """``dataset``'s options in ``table``, unless registered for a record that is no longer ``dataset``'s."""
    record = _REGISTERED_FOR.get(dataset)
    if record is not None and (dataset not in registry.registered() or registry.get(dataset) is not record):
        return ()
    return table.get(dataset, ())


def _flags(options: tuple[Option, ...]) -> set[str]:
    return {option.flag for option in options}


def prepare_options(dataset: str) -> tuple[Option, ...]:
    """The ``prepare-data`` options of ``dataset``: its declaration's config (EMNIST's ``--split``), then its own."""
    declaration = registry.declaration(dataset)
    derived = () if declaration is None or declaration.config_option is None else (
        Option(f"--{declaration.config_option}", declaration.config_option,
               f"{declaration.title} {declaration.config_option} (repeatable)", repeatable=True,
               default=declaration.config, choices=tuple(declaration.configs)),
    )
    return (*derived, *_own(PREPARE, dataset))


def scene_options(dataset: str) -> tuple[Option, ...]:
    """The ``build scenes`` options of glyph dataset ``dataset``: its config (``--emnist-split``), then its own."""
    declaration = registry.declaration(dataset)
    derived = () if declaration is None or declaration.config_option is None else (
        Option(f"--{dataset}-{declaration.config_option}", declaration.config_option,
               f"{declaration.title} {declaration.config_option} the glyphs come from", default=declaration.config,
               choices=tuple(declaration.configs)),
    )
    return (*derived, *_own(SCENES, dataset))
