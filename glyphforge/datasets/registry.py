"""The dataset registry: one record per dataset, read by the CLI, ``glyphforge info``, previews and scenes.

A record names a dataset and says where its parts are; the parts are named as
``"module:function"`` strings (imported on first use, so reading the registry, as
``prepare-data --help`` does, imports no dataset code) or given as callables.

Adding a dataset is one module (``glyphforge/datasets/<name>.py``; datasets of one
form may share one, as MNIST, Fashion-MNIST and KMNIST share ``mnist_family.py``) and
one `register` call (in this module's list :data:`BUILT_IN` for the datasets glyphforge
ships). A name is lowercase, an identifier or identifiers joined by hyphens
(``"emnist"``, ``"fashion-mnist"``): it is also the cache kind, the folder of the
upstream files in ``raw/`` and on mirrors, and the ``prepare-data`` argument. Its parts
follow these contracts:

``prepare(*, shapes, data_dir, mirrors, verify, progress, offline, **options) -> list[Entry]``
    Fetch, verify and convert into the cache (kind ``name``); idempotent. ``options``
    are the keywords of the record's `Option` s (what ``prepare-data NAME`` offers).
``load(...)``
    The loader users call (``glyphforge.load_<name>``); listed by ``glyphforge info``.
``preview(entry, n, rng, data_dir) -> (images, labels)``
    ``n`` examples of a prepared entry picked with ``rng`` (reading the cache only):
    an image array or a list of images, and one label string per image.
``glyphs(classes, *, example_range, shape, data_dir, **options) -> (images, labels, class_names)``
    Optional: glyph images scenes may draw, read from the cache only (the build's
    driver prepares them first with ``prepare(shapes=[shape], **glyph_prepare, **options)``).
``resources``
    Optional: the dataset's upstream files (`glyphforge.pipelines.download.Resource`), named
    as a Resource, a mapping or a sequence of them, or a function of no arguments returning
    them; read by `resources`, for ``glyphforge cache ls/verify/gc`` on ``raw/``.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from glyphforge.cli_args import existing_file, local_workers

if TYPE_CHECKING:
    from glyphforge.pipelines.download import Resource

#: A part of a dataset: a callable, or ``"module:attribute"`` naming one (imported on use).
Ref = str | Callable[..., Any]


def resolve(ref: Ref) -> Callable[..., Any]:
    """Return the callable ``ref`` names (imports its module the first time)."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


@dataclass(frozen=True)
class Option:
    """One ``prepare-data`` option of a dataset: its flag, the prepare keyword it fills, argparse settings."""

    flag: str
    param: str
    help: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``ArgumentParser.add_argument`` keywords (``nargs``, ``type``, ``default``, ``metavar``...)."""

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup, dest: str) -> None:
        """Add this option to ``parser`` (an ArgumentParser or an argument group), stored as ``dest``."""
        settings = {"metavar": self.param.upper(), **self.settings}
        parser.add_argument(self.flag, dest=dest, help=self.help, default=None, **settings)


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
    default_resize: str = "box"
    """The resize method of the dataset's resized variants and loaders (README: "Resizing")."""
    resources: Ref | None = None
    """The upstream files (see the module docstring); None: none declared."""


_REGISTRY: dict[str, DatasetRecord] = {}
#: Lowercase identifiers, alone or joined by single hyphens: ``emnist``, ``fashion-mnist``.
_NAME = re.compile(r"[a-z_][a-z0-9_]*(-[a-z0-9_]+)*")


def register(record: DatasetRecord) -> DatasetRecord:
    """Add ``record`` (replacing one of the same name); return it."""
    if not isinstance(record.name, str) or not _NAME.fullmatch(record.name):
        raise ValueError(
            f"dataset name {record.name!r} must be a lowercase identifier such as 'emnist', or lowercase identifiers "
            "joined by hyphens such as 'fashion-mnist'"
        )
    _REGISTRY[record.name] = record
    return record


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
    from glyphforge.pipelines.download import Resource

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
    family = importlib.import_module("glyphforge.datasets._mnist_files").DATASETS[name]
    return family.resources.values()


def glyph_sources() -> list[str]:
    """Return the registered datasets that scenes can draw glyphs from, sorted."""
    return [name for name in registered() if _REGISTRY[name].glyphs is not None]


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
            Option("--split", "split", "EMNIST split (repeatable; default byclass)",
                   {"action": "append", "metavar": "SPLIT"}),
            Option("--emnist-archive", "archives", "convert this local copy of NIST's gzip.zip instead of fetching it",
                   {"type": lambda path: {"gzip.zip": existing_file(path, "a copy of NIST's gzip.zip")},
                    "metavar": "ZIP"}),
        ),
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
            Option("--omniglot-sets", "sets", "Omniglot sets: background evaluation small1 small2 "
                   "(default background evaluation)", {"nargs": "+", "metavar": "SET"}),
            Option("--workers", "workers", "processes for decoding Omniglot (default: one per CPU for sets of "
                   "10,000 images or more, else none)",
                   {"type": local_workers, "metavar": "N"}),
        ),
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
                   "such as water ice (default all)", {"nargs": "+", "metavar": "NAME"}),
        ),
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
        resources=functools.partial(_mnist_family_files, "kmnist"),
    ),
)

for _record in BUILT_IN:
    register(_record)
