"""Which own copies (unverified) a scenes build reads: the files behind its glyphs and textures that are not upstream's.

A scenes build draws glyphs through a dataset's ``glyphs`` part and textures through the
backgrounds' ``load``; both read the copy in use, or, with ``verify`` off (``--no-verify``), the copy
a prepare chooses (files placed in ``raw/``), which the build's prepare then makes the one in use
(`glyphforge.datasets.own_files`).
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
from glyphforge.datasets import own_files


def glyph_files(dataset: str, options: Mapping[str, Any], context: DataContext) -> dict[str, str]:
    """The own files the glyphs of ``dataset`` with glyph ``options`` are read from (Omniglot: of its ``sets``)."""
    return own_files(dataset, context, **options)


def texture_files(names: str | Iterable[str], context: DataContext) -> dict[str, str]:
    """The own files of the backgrounds ``names`` (``"all"``, ``"hard"`` or names)."""
    return own_files("backgrounds", context, names=names)
