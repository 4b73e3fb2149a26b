"""Which own copies (unverified) a scenes build reads: the files behind its glyphs and textures that are not upstream's.

A scenes build draws glyphs through a dataset's ``glyphs`` part and textures through the
backgrounds' ``load``; both read the copy in use (:func:`glyphforge.datasets.own_copies.in_use`), or,
with ``verify`` off (``--no-verify``), the copy a prepare chooses (:func:`~glyphforge.datasets.own_copies.chosen`:
files placed in ``raw/``), which the build's prepare then makes the one in use.
:func:`glyph_files` and :func:`texture_files` say which of those files are own copies,
``{name: "sha256:<hex>"}`` (empty: upstream's), reading no image: the build's driver keys
its entry by them (`glyphforge.builds.making.builder.cache_params`). Glyph datasets other than the
declared per-class ones and Omniglot have no own copies (their files are not glyphforge's to
check): empty.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from glyphforge.context import DataContext
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.pipelines.resource import Resource


def glyph_files(dataset: str, options: Mapping[str, Any], context: DataContext) -> dict[str, str]:
    """The own files the glyphs of ``dataset`` with glyph ``options`` are read from (Omniglot: of its ``sets``)."""
    from glyphforge.datasets.classes.declaration import DECLARATIONS

    if dataset in DECLARATIONS:  # every config reads all of the dataset's files
        return _copy(dataset, DECLARATIONS[dataset].resources, context)
    if dataset == "omniglot":
        from glyphforge.datasets.omniglot.prepare import DEFAULT_SETS, KIND, RESOURCES, check_sets

        return _copy(KIND, {name: RESOURCES[name] for name in check_sets(options.get("sets", DEFAULT_SETS))}, context)
    return {}


def texture_files(names: str | Iterable[str], context: DataContext) -> dict[str, str]:
    """The own files of the backgrounds ``names`` (``"all"``, ``"hard"`` or names)."""
    from glyphforge.datasets.backgrounds import IMAGES, KIND, check_names

    return _copy(KIND, {name: IMAGES[name] for name in check_names(names)}, context)


def _copy(dataset: str, resources: Mapping[str, Resource], context: DataContext) -> dict[str, str]:
    """The own files of ``resources`` a build with ``context`` reads (see the module docstring)."""
    if context.verify:
        return _own_copy.in_use(dataset, resources, context).own
    return _own_copy.chosen(dataset, resources, context, {}).own
