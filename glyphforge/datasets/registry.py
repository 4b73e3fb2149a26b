"""The dataset registry: one record per dataset, read by the CLI, ``glyphforge info``, previews, scenes and `load`.

A record names a dataset and says where its parts are; the parts are named as
``"module:function"`` strings (imported on first use, so reading the registry, as
``prepare-data --help`` and ``import glyphforge`` do, imports no dataset code) or given as
callables. The registry knows nothing of argparse: a record's command-line options are
typed `Option` s, which the CLI (`glyphforge.cli.args.add_option`) turns into arguments.

Adding a dataset is one module (``glyphforge/datasets/<name>.py``) and one `register`
call (in this module's list :data:`BUILT_IN` for the datasets glyphforge ships). A dataset
stored as one file per class (EMNIST, the MNIST family, any IDX set of that shape) is a
declaration of its resources, configs, reader and default resize
(`glyphforge.datasets._class_declaration.Declaration`), which gives it every part. A name is
lowercase, an identifier or identifiers joined by hyphens (``"emnist"``,
``"fashion-mnist"``): it is also the cache kind, the folder of the upstream files in ``raw/``
and on mirrors, and the ``prepare-data`` argument. Its parts follow these contracts
(``context`` is a `glyphforge.context.DataContext`):

``prepare(*, context, shapes=(), **options) -> list[Entry]``
    Fetch, verify and convert into the cache (kind ``name``); idempotent. ``options``
    are the keywords of the record's `Option` s (what ``prepare-data NAME`` offers).
``load(classes=None, *, context=None, ..., **options) -> (x, y, classes)``
    The loader users call (``glyphforge.load_<name>``, or ``glyphforge.load(name)``, see
    `load`); listed by ``glyphforge info``.
``preview(entry, n, rng, context) -> (images, labels)``
    ``n`` examples of a prepared entry picked with ``rng`` (reading the cache only):
    an image array or a list of images, and one label string per image.
``glyphs(classes, *, example_range, shape, context, **options) -> (images, labels, class_names)``
    Optional: glyph images scenes may draw, read from the cache only (the build's
    driver prepares them first with ``prepare(shapes=[shape], **glyph_prepare, **options)``).
    The record's ``scene_options`` are the ``glyphforge build scenes`` flags that fill
    ``options`` (``--emnist-split SPLIT`` is ``--glyph-option split=SPLIT``).
``entry_label(entry) -> str``
    How ``prepare-data``'s table names an entry, e.g. ``"byclass 28x28"`` (default:
    the image size only, see `glyphforge.datasets.labels`).
``resources``
    Optional: the dataset's upstream files (`glyphforge.pipelines.resource.Resource`), named
    as a Resource, a mapping or a sequence of them, or a function of no arguments returning
    them; read by `resources`, for ``glyphforge cache ls/verify/gc`` on ``raw/``.

A record's ``exports`` are its public names, re-exported by ``glyphforge`` (lazily): a bare
name lives in the module of the record's ``load`` part, ``"module:name"`` anywhere.
"""
from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from glyphforge._checks import worker_count

if TYPE_CHECKING:
    from pathlib import Path

    from glyphforge.cache.entry import Entry
    from glyphforge.context import DataContext
    from glyphforge.pipelines.resource import Resource

#: A part of a dataset: a callable, or ``"module:attribute"`` naming one (imported on use).
Ref = str | Callable[..., Any]
#: What one command-line value of an `Option` is: text, an integer, or a path (``~`` expanded).
ValueKind = type[str] | type[int] | Literal["path"]
#: The label of entries whose record declares none: the image size.
DEFAULT_ENTRY_LABEL = "glyphforge.datasets.labels:shape_label"


def resolve(ref: Ref) -> Callable[..., Any]:
    """Return the callable ``ref`` names (imports its module the first time)."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


@dataclass(frozen=True)
class Option:
    """One command-line option of a dataset: its flag, the keyword it fills, and how its value is read.

    Parameters
    ----------
    flag
        The flag, e.g. ``"--emnist-archive"``.
    param
        The keyword of the dataset's ``prepare`` (or, in ``scene_options``, the glyph option) it fills.
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


@dataclass(frozen=True)
class DatasetRecord:
    """What glyphforge knows of one dataset (see the module docstring for the parts' contracts)."""

    name: str
    summary: str
    prepare: Ref
    load: Ref
    preview: Ref
    glyphs: Ref | None = None
    glyph_prepare: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``prepare`` keywords that make the entries ``glyphs`` reads (Omniglot: ``method="box"``)."""
    glyph_classes: Ref | None = None
    """Optional ``(**options) -> list[str]``: the glyph classes, where they are known without any data
    (EMNIST's splits), so scenes can refuse an unknown class before preparing anything."""
    options: tuple[Option, ...] = ()
    """The ``prepare-data`` options; each fills a ``prepare`` keyword."""
    scene_options: tuple[Option, ...] = ()
    """The ``glyphforge build scenes`` options for glyphs of this dataset; each fills a glyph option."""
    entry_label: Ref = DEFAULT_ENTRY_LABEL
    """``(entry) -> str``: how ``prepare-data``'s table names an entry (e.g. ``"byclass 28x28"``)."""
    exports: tuple[str, ...] = ()
    """Public names re-exported by ``glyphforge``: bare (in the ``load`` part's module) or ``"module:name"``."""
    default_resize: str = "box"
    """The resize method of the dataset's resized variants and loaders (README: "Resizing")."""
    resources: Ref | None = None
    """The upstream files (see the module docstring); None: none declared."""


_REGISTRY: dict[str, DatasetRecord] = {}
#: Lowercase identifiers, alone or joined by single hyphens: ``emnist``, ``fashion-mnist``.
_NAME = re.compile(r"[a-z_][a-z0-9_]*(-[a-z0-9_]+)*")


def register(record: DatasetRecord) -> DatasetRecord:
    """Add ``record`` (replacing one of the same name); return it.

    Raises
    ------
    ValueError
        The name is not a lowercase identifier (or such joined by hyphens), or an option
        flag or export name is already another dataset's.
    """
    if not isinstance(record.name, str) or not _NAME.fullmatch(record.name):
        raise ValueError(
            f"dataset name {record.name!r} must be a lowercase identifier such as 'emnist', or lowercase identifiers "
            "joined by hyphens such as 'fashion-mnist'"
        )
    others = [other for other in _REGISTRY.values() if other.name != record.name]
    for what, mine, theirs in (
        ("prepare-data option", _flags(record.options), {o.name: _flags(o.options) for o in others}),
        ("build scenes option", _flags(record.scene_options), {o.name: _flags(o.scene_options) for o in others}),
        ("export", _export_names(record), {o.name: _export_names(o) for o in others}),
    ):
        for other, taken in theirs.items():
            clash = sorted(mine & taken)
            if clash:
                raise ValueError(f"dataset {record.name!r} declares the {what} {clash[0]}, which dataset {other!r} "
                                 f"already declares: give {record.name!r} its own (e.g. prefixed with its name)")
    _REGISTRY[record.name] = record
    return record


def _flags(options: tuple[Option, ...]) -> set[str]:
    return {option.flag for option in options}


def _export_names(record: DatasetRecord) -> set[str]:
    return {ref.rpartition(":")[2] for ref in record.exports}


def unregister(name: str) -> None:
    """Remove the dataset ``name`` (for tests that register a toy dataset)."""
    _REGISTRY.pop(name, None)


def registered() -> list[str]:
    """Return the names of the registered datasets, sorted."""
    return sorted(_REGISTRY)


def get(name: str) -> DatasetRecord:
    """Return the record of dataset ``name``; a KeyError lists the registered names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(registered())
        raise KeyError(f"no dataset {name!r} is registered; the registered ones are {known}") from None


def resources(name: str) -> list[Resource]:
    """Return the upstream files dataset ``name`` declares (none for a name not registered, or none declared)."""
    from glyphforge.pipelines.resource import Resource

    record = _REGISTRY.get(name)
    if record is None or record.resources is None:
        return []
    declared: Any = resolve(record.resources)
    if callable(declared):
        declared = declared()
    if isinstance(declared, Resource):
        return [declared]
    return list(declared.values() if isinstance(declared, Mapping) else declared)


def _mnist_family_files(name: str) -> Iterable[Resource]:
    """The four files of the MNIST-family dataset ``name`` (imported on use)."""
    declaration = importlib.import_module("glyphforge.datasets.mnist_family").DATASETS[name]
    return declaration.resources.values()


def glyph_sources() -> list[str]:
    """Return the registered datasets that scenes can draw glyphs from, sorted."""
    return [name for name in registered() if _REGISTRY[name].glyphs is not None]


def entry_label(entry: Entry) -> str:
    """Return the label of a prepared ``entry`` (its record's ``entry_label``, else its image size)."""
    record = _REGISTRY.get(entry.kind)
    label: str = resolve(DEFAULT_ENTRY_LABEL if record is None else record.entry_label)(entry)
    return label


def exports() -> dict[str, str]:
    """Return ``{public name: module}`` of every registered dataset's ``exports`` (``glyphforge`` re-exports them)."""
    found: dict[str, str] = {}
    for name in registered():
        record = _REGISTRY[name]
        load = record.load
        home = load.partition(":")[0] if isinstance(load, str) else load.__module__
        for ref in record.exports:
            module, _, attribute = ref.rpartition(":")
            found[attribute] = module or home
    return found


def load(name: str, classes: Any = None, *, context: DataContext | None = None, **options: Any) -> Any:
    """Load the registered dataset ``name`` through its record's loader, as ``tfds.load`` does.

    Parameters
    ----------
    name
        A registered dataset (`registered`), e.g. ``"mnist"``.
    classes
        The classes to load (None: all), as the dataset's ``load_*`` takes them.
    context
        Where the data lives and how it may be fetched (None: the loose keywords in
        ``options``, such as ``data_dir=``, and the environment).
    **options
        Keywords of the dataset's loader (``shape=(14, 14)``, ``seed=0``, ``split="letters"``...).

    Returns
    -------
    tuple
        ``(x, y, classes)``, as the dataset's ``load_*`` returns it.

    Raises
    ------
    KeyError
        ``name`` is not registered (the message lists the registered names).
    TypeError
        An option the dataset's loader does not take (the message lists the ones it takes).
    """
    loader = resolve(get(name).load)
    if context is not None:  # a loader written before contexts works when none is given
        options["context"] = context
    _check_options(name, loader, options)
    return loader(classes, **options)


def _check_options(name: str, loader: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse keywords ``loader`` does not take, naming the ones it takes (not its first, the classes)."""
    import inspect  # here, not at the top: `import glyphforge` reads this module

    parameters = list(inspect.signature(loader).parameters.values())
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        return
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    takes = [parameter.name for parameter in parameters[1:] if parameter.kind in named]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        listed = ", ".join(repr(option) for option in unknown)
        raise TypeError(f"glyphforge.load({name!r}) got the option(s) {listed}, which the {name} loader does not "
                        f"take; it takes {', '.join(takes) or 'no options'}")


def emnist_archive(path: Path) -> dict[str, Path]:
    """``--emnist-archive PATH``: ``archives={"gzip.zip": path}`` for a file that exists."""
    from glyphforge._files import existing_file

    return {"gzip.zip": existing_file(path, "a copy of NIST's gzip.zip")}


BUILT_IN = (
    DatasetRecord(
        name="emnist",
        summary="EMNIST handwritten digits and letters (NIST's gzip.zip, every split)",
        prepare="glyphforge.datasets.emnist:prepare_emnist",
        load="glyphforge.datasets.emnist:load_emnist",
        preview="glyphforge.datasets.emnist:preview_examples",
        glyphs="glyphforge.datasets.emnist:glyph_images",
        glyph_classes="glyphforge.datasets.emnist:emnist_classes",
        options=(
            Option("--split", "split", "EMNIST split (repeatable)", repeatable=True, default="byclass"),
            Option("--emnist-archive", "archives", "convert this local copy of NIST's gzip.zip instead of fetching it",
                   value="path", metavar="ZIP", convert=emnist_archive),
        ),
        scene_options=(Option("--emnist-split", "split", "EMNIST split the glyphs come from", default="byclass"),),
        entry_label="glyphforge.datasets.labels:emnist_label",
        exports=("prepare_emnist", "load_emnist", "emnist_classes", "EMNIST"),
        default_resize="box",
        resources="glyphforge.datasets._emnist_archive:EMNIST_ZIP",
    ),
    DatasetRecord(
        name="omniglot",
        summary="Omniglot characters of 50 alphabets, 20 drawers each (Brenden Lake's zips)",
        prepare="glyphforge.datasets.omniglot:prepare_omniglot",
        load="glyphforge.datasets.omniglot:load_omniglot",
        preview="glyphforge.datasets.omniglot:preview_examples",
        glyphs="glyphforge.datasets.omniglot:glyph_images",
        glyph_prepare={"method": "box"},
        options=(
            Option("--omniglot-sets", "sets", "Omniglot sets: background evaluation small1 small2", many=True,
                   metavar="SET", default="background evaluation"),
            Option("--workers", "workers", "processes for decoding Omniglot", value=int, metavar="N",
                   default="one per CPU for sets of 10,000 images or more, else none", convert=worker_count),
        ),
        scene_options=(Option("--omniglot-sets", "sets", "Omniglot sets the glyphs come from", many=True,
                              metavar="SET", default="background evaluation"),),
        entry_label="glyphforge.datasets.labels:omniglot_label",
        exports=("prepare_omniglot", "load_omniglot", "omniglot_classes", "omniglot_episodes", "Omniglot"),
        default_resize="area",
        resources="glyphforge.datasets._omniglot_prepare:RESOURCES",
    ),
    DatasetRecord(
        name="backgrounds",
        summary="texture and shape backgrounds of e2crawfo/backgrounds (a pinned commit)",
        prepare="glyphforge.datasets.backgrounds:prepare_backgrounds",
        load="glyphforge.datasets.backgrounds:load_backgrounds",
        preview="glyphforge.datasets.backgrounds:preview_examples",
        options=(
            Option("--backgrounds", "names", "backgrounds to fetch: all, hard (the .jpg textures) or names "
                   "such as water ice", many=True, metavar="NAME", default="all"),
        ),
        exports=("prepare_backgrounds", "load_backgrounds", "background_names", "hard_background_names"),
        default_resize="bilinear",
        resources="glyphforge.datasets.backgrounds:RESOURCES",
    ),
    DatasetRecord(
        name="mnist",
        summary="MNIST handwritten digits 0-9 (LeCun's IDX files)",
        prepare="glyphforge.datasets.mnist_family:prepare_mnist",
        load="glyphforge.datasets.mnist_family:load_mnist",
        preview="glyphforge.datasets.mnist_family:preview_examples",
        glyphs="glyphforge.datasets.mnist_family:mnist_glyph_images",
        glyph_classes="glyphforge.datasets.mnist_family:mnist_classes",
        default_resize="box",
        exports=("prepare_mnist", "load_mnist", "mnist_classes", "MNIST"),
        resources=functools.partial(_mnist_family_files, "mnist"),
    ),
    DatasetRecord(
        name="fashion-mnist",
        summary="Fashion-MNIST: Zalando's clothes and shoes in MNIST's form (10 classes)",
        prepare="glyphforge.datasets.mnist_family:prepare_fashion_mnist",
        load="glyphforge.datasets.mnist_family:load_fashion_mnist",
        preview="glyphforge.datasets.mnist_family:preview_examples",
        glyphs="glyphforge.datasets.mnist_family:fashion_mnist_glyph_images",
        glyph_classes="glyphforge.datasets.mnist_family:fashion_mnist_classes",
        default_resize="box",
        exports=("prepare_fashion_mnist", "load_fashion_mnist", "fashion_mnist_classes", "FashionMNIST"),
        resources=functools.partial(_mnist_family_files, "fashion-mnist"),
    ),
    DatasetRecord(
        name="kmnist",
        summary="Kuzushiji-MNIST: ten cursive Japanese kana in MNIST's form",
        prepare="glyphforge.datasets.mnist_family:prepare_kmnist",
        load="glyphforge.datasets.mnist_family:load_kmnist",
        preview="glyphforge.datasets.mnist_family:preview_examples",
        glyphs="glyphforge.datasets.mnist_family:kmnist_glyph_images",
        glyph_classes="glyphforge.datasets.mnist_family:kmnist_classes",
        default_resize="box",
        exports=("prepare_kmnist", "load_kmnist", "kmnist_classes", "KMNIST"),
        resources=functools.partial(_mnist_family_files, "kmnist"),
    ),
)

for _record in BUILT_IN:
    register(_record)
