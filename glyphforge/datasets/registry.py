"""The dataset registry: one record per dataset, read by the CLI, ``glyphforge info``, previews, scenes and `load`.

A record names a dataset and says where its parts are; the parts are named as
``"module:function"`` strings (imported on first use, so reading the registry, as
``prepare-data --help`` and ``import glyphforge`` do, imports no dataset code) or given as
callables. The registry holds data only: a dataset's command-line options live in the CLI
(`glyphforge.cli.dataset_options`), the glyphs scenes draw from it in the scenes
(`glyphforge.scenes.glyph_datasets`); both read the declaration a record names.

Adding a dataset is one module (``glyphforge/datasets/<name>.py``) and one `register`
call (in this module's list :data:`BUILT_IN` for the datasets glyphforge ships). A dataset
stored as one file per class (EMNIST, the MNIST family, any IDX set of that shape) is a
declaration of its resources, configs, reader and default resize
(`glyphforge.datasets.classes.declaration.Declaration`), which gives it every part: its
record is `declared` (the name, a summary, the module declaring it and the name of its
map-style class; everything else follows from the declaration). A name is
lowercase, an identifier or identifiers joined by hyphens (``"emnist"``,
``"fashion-mnist"``): it is also the cache kind, the folder of the upstream files in ``raw/``
and on mirrors, and the ``prepare-data`` argument. Its parts follow these contracts
(``context`` is a `glyphforge.context.DataContext`):

``prepare(*, context, shapes=(), **options) -> list[Entry]``
    Fetch, verify and convert into the cache (kind ``name``); idempotent. ``options``
    are what ``prepare-data NAME`` offers (`glyphforge.cli.dataset_options`).
``load(classes=None, *, context=None, ..., **options) -> (x, y, classes)``
    The loader users call (``glyphforge.load_<name>``, or ``glyphforge.load(name)``, see
    `load`); listed by ``glyphforge info``.
``preview(entry, n, rng, context) -> (images, labels)``
    ``n`` examples of a prepared entry picked with ``rng`` (reading the cache only):
    an image array or a list of images, and one label string per image.
``entry_label(entry) -> str``
    How ``prepare-data``'s table names an entry, e.g. ``"byclass 28x28"`` (default:
    the image size only, see `glyphforge.datasets.labels`).
``resources``
    Optional: the dataset's upstream files (`glyphforge.pipelines.resource.Resource`), named
    as a Resource, a mapping or a sequence of them, or a function of no arguments returning
    them; read by `resources`, for ``glyphforge cache ls/verify/gc`` on ``raw/``.
``needs(**options) -> resources``
    Optional: the upstream files ``prepare`` fetches with these ``options`` (Omniglot's
    ``sets``, the backgrounds' ``names``; others are ignored), named as ``resources`` are;
    read by `needed`, for ``prepare-data --list`` and ``--download-only``. None: all of
    ``resources``.

A record's ``exports`` are its public names, re-exported by ``glyphforge`` (lazily): a bare
name lives in the module of the record's ``load`` part, ``"module:name"`` anywhere.
"""
from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glyphforge.cache.entry import Entry
    from glyphforge.context import DataContext
    from glyphforge.datasets.classes.declaration import Declaration
    from glyphforge.pipelines.resource import Resource

#: A part of a dataset: a callable, or ``"module:attribute"`` naming one (imported on use).
Ref = str | Callable[..., Any]
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
class DatasetRecord:
    """What glyphforge knows of one dataset (see the module docstring for the parts' contracts)."""

    name: str
    summary: str
    prepare: Ref
    load: Ref
    preview: Ref
    entry_label: Ref = DEFAULT_ENTRY_LABEL
    """``(entry) -> str``: how ``prepare-data``'s table names an entry (e.g. ``"byclass 28x28"``)."""
    exports: tuple[str, ...] = ()
    """Public names re-exported by ``glyphforge``: bare (in the ``load`` part's module) or ``"module:name"``."""
    default_resize: str = "box"
    """The resize method of the dataset's resized variants and loaders (README: "Resizing")."""
    resources: Ref | None = None
    """The upstream files (see the module docstring); None: none declared."""
    needs: Ref | None = None
    """``(**options) -> resources``: the files ``prepare`` fetches with ``options`` (see the module); None: all."""
    declared_in: str | None = None
    """The module declaring the dataset as a per-class `Declaration` of this name (see `declared`); None: not one."""


def declared(name: str, summary: str, module: str, dataset_class: str, **more: Any) -> DatasetRecord:
    """Return the record of the per-class dataset ``name`` that ``module`` declares (a `Declaration`).

    Its parts are the public functions ``module`` writes for the declaration (``prepare_<name>``,
    ``load_<name>``, ``<name>_classes``, see `glyphforge.datasets.classes.files.documented`) and the
    map-style class ``dataset_class``, all exported; its upstream files are the declaration's.
    ``more`` are other record fields (``entry_label``). Nothing is imported here.
    """
    ident = name.replace("-", "_")
    return DatasetRecord(
        name=name, summary=summary, prepare=f"{module}:prepare_{ident}", load=f"{module}:load_{ident}",
        preview="glyphforge.datasets.classes.load:preview",
        exports=(f"prepare_{ident}", f"load_{ident}", f"{ident}_classes", dataset_class),
        resources=functools.partial(_declared_resources, module, name), declared_in=module, **more,
    )


def declaration(name: str) -> Declaration | None:
    """Return the per-class `Declaration` of dataset ``name`` (importing its module), or None when it is not one."""
    record = _REGISTRY.get(name)
    if record is None or record.declared_in is None:
        return None
    importlib.import_module(record.declared_in)
    from glyphforge.datasets.classes.declaration import DECLARATIONS

    return DECLARATIONS[name]


def _declared_resources(module: str, name: str) -> Mapping[str, Resource]:
    """The upstream files of the per-class dataset ``name`` declared in ``module`` (imported on use), by name."""
    importlib.import_module(module)
    from glyphforge.datasets.classes.declaration import DECLARATIONS

    return DECLARATIONS[name].resources


_REGISTRY: dict[str, DatasetRecord] = {}
#: Lowercase identifiers, alone or joined by single hyphens: ``emnist``, ``fashion-mnist``.
_NAME = re.compile(r"[a-z_][a-z0-9_]*(-[a-z0-9_]+)*")


def register(record: DatasetRecord) -> DatasetRecord:
    """Add ``record`` (replacing one of the same name); return it.

    Raises
    ------
    ValueError
        The name is not a lowercase identifier (or such joined by hyphens), or an export
        name is already another dataset's.
    """
    if not isinstance(record.name, str) or not _NAME.fullmatch(record.name):
        raise ValueError(
            f"dataset name {record.name!r} must be a lowercase identifier such as 'emnist', or lowercase identifiers "
            "joined by hyphens such as 'fashion-mnist'"
        )
    others = [other for other in _REGISTRY.values() if other.name != record.name]
    refuse_clash(record.name, "export", _export_names(record), {o.name: _export_names(o) for o in others})
    _REGISTRY[record.name] = record
    return record


def refuse_clash(dataset: str, what: str, mine: set[str], theirs: Mapping[str, set[str]]) -> None:
    """Refuse ``mine``, the names of kind ``what`` dataset ``dataset`` declares, when another's (``theirs``) has one.

    Raises
    ------
    ValueError
        Naming the first name both declare and the other dataset.
    """
    for other, taken in theirs.items():
        clash = sorted(mine & taken)
        if clash:
            raise ValueError(f"dataset {dataset!r} declares the {what} {clash[0]}, which dataset {other!r} "
                             f"already declares: give {dataset!r} its own (e.g. prefixed with its name)")


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
    record = _REGISTRY.get(name)
    return [] if record is None else _listed(_declared(record))


def needed(name: str, **options: Any) -> list[Resource]:
    """Return the upstream files ``prepare`` of dataset ``name`` fetches with ``options`` (its record's ``needs``,
    else all of `resources`), less those given as local copies (``archives=``, as `--emnist-archive`).

    Raises
    ------
    KeyError
        ``name`` is not registered.
    ValueError
        An option's value is not one the dataset takes (an unknown Omniglot set, an ``archives`` name that is
        none of its files...).
    """
    record = get(name)
    found = resources(name) if record.needs is None else _listed(resolve(record.needs)(**options))
    if not options.get("archives"):
        return found
    from glyphforge.datasets.prepare_steps import given_archives  # here: `import glyphforge` reads this module

    declared = _declared(record)
    by_name = dict(declared) if isinstance(declared, Mapping) else {each.filename: each for each in _listed(declared)}
    local = {by_name[key].filename for key in given_archives(options["archives"], by_name, name)}
    return [resource for resource in found if resource.filename not in local]


def _declared(record: DatasetRecord) -> Any:
    """The upstream files ``record`` declares, as declared: one `Resource`, a mapping or a sequence (none: ``()``)."""
    if record.resources is None:
        return ()
    declared: Any = resolve(record.resources)
    return declared() if callable(declared) else declared


def _listed(declared: Any) -> list[Resource]:
    """The resources of ``declared``: one `Resource`, a mapping of them or a sequence of them."""
    from glyphforge.pipelines.resource import Resource

    if isinstance(declared, Resource):
        return [declared]
    return list(declared.values() if isinstance(declared, Mapping) else declared)


def dataset_part(dataset: str, part: str, context: DataContext) -> Callable[..., Any]:
    """Return part ``part`` (``"prepare"``, ``"load"`` or ``"preview"``) of ``dataset`` with ``context`` bound.

    Every dataset's parts take the data context (see the module docstring): this is how
    glyphforge calls them, so the one context resolved from the command line or a build's
    arguments reaches each dataset.
    """
    return functools.partial(resolve(getattr(get(dataset), part)), context=context)


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


BUILT_IN = (
    declared("emnist", "EMNIST handwritten digits and letters (NIST's gzip.zip, every split)",
             "glyphforge.datasets.emnist", "EMNIST", entry_label="glyphforge.datasets.labels:emnist_label"),
    DatasetRecord(
        name="omniglot",
        summary="Omniglot characters of 50 alphabets, 20 drawers each (Brenden Lake's zips)",
        prepare="glyphforge.datasets.omniglot.dataset:prepare_omniglot",
        load="glyphforge.datasets.omniglot.dataset:load_omniglot",
        preview="glyphforge.datasets.omniglot.dataset:preview_examples",
        entry_label="glyphforge.datasets.labels:omniglot_label",
        exports=("prepare_omniglot", "load_omniglot", "omniglot_classes", "omniglot_episodes", "Omniglot",
                 "omniglot_split", "OmniglotTasks", "TaskBatch"),
        default_resize="area",
        resources="glyphforge.datasets.omniglot.prepare:RESOURCES",
        needs="glyphforge.datasets.omniglot.prepare:needed",
    ),
    DatasetRecord(
        name="backgrounds",
        summary="texture and shape backgrounds of e2crawfo/backgrounds (a pinned commit)",
        prepare="glyphforge.datasets.backgrounds:prepare_backgrounds",
        load="glyphforge.datasets.backgrounds:load_backgrounds",
        preview="glyphforge.datasets.backgrounds:preview_examples",
        exports=("prepare_backgrounds", "load_backgrounds", "background_names", "hard_background_names"),
        default_resize="bilinear",
        resources="glyphforge.datasets.backgrounds:RESOURCES",
        needs="glyphforge.datasets.backgrounds:needed",
    ),
    declared("mnist", "MNIST handwritten digits 0-9 (LeCun's IDX files)", "glyphforge.datasets.mnist", "MNIST"),
    declared("fashion-mnist", "Fashion-MNIST: Zalando's clothes and shoes in MNIST's form (10 classes)",
             "glyphforge.datasets.fashion_mnist", "FashionMNIST"),
    declared("kmnist", "Kuzushiji-MNIST: ten cursive Japanese kana in MNIST's form",
             "glyphforge.datasets.kmnist", "KMNIST"),
)

for _record in BUILT_IN:
    register(_record)
