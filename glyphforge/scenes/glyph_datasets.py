"""Which registered datasets scenes draw glyphs from, and how: `GlyphDataset`.

A per-class dataset (a `glyphforge.datasets.classes.declaration.Declaration`: EMNIST, the
MNIST family, or one declared at run time) is a glyph dataset as declared: its glyphs and
its class names are read from the declaration. Any other registered dataset is one when
registered here (`register_glyphs`): Omniglot is, the backgrounds are not.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from glyphforge import datasets


@dataclass(frozen=True)
class GlyphDataset:
    """How scenes draw glyphs from one registered dataset.

    Parameters
    ----------
    glyphs
        ``(classes, *, example_range, shape, context, **options) -> (images, labels, class_names)``:
        the glyph images, read from the cache only (the build's driver prepares them first with
        the dataset's ``prepare(shapes=[shape], **prepare, **options)``); ``options`` are the
        spec's ``glyph_options`` (EMNIST: ``split``).
    prepare
        Extra ``prepare`` keywords that make the entries ``glyphs`` reads (Omniglot: ``method="box"``).
    classes
        Optional ``(**options) -> list[str]``: the glyph classes, where they are known without any
        data (EMNIST's splits), so scenes can refuse an unknown class before preparing anything.
    """

    glyphs: datasets.Ref
    prepare: Mapping[str, Any] = field(default_factory=dict)
    classes: datasets.Ref | None = None


#: The glyph datasets that are not per-class, by name: glyphforge's own, and those registered at run time with
#: the record they were registered for (a registration ends when that record is replaced or unregistered).
_REGISTERED: dict[str, tuple[datasets.DatasetRecord | None, GlyphDataset]] = {
    "omniglot": (None, GlyphDataset("glyphforge.datasets.omniglot.dataset:glyph_images", prepare={"method": "box"})),
}


def register_glyphs(name: str, glyph_dataset: GlyphDataset) -> GlyphDataset:
    """Let scenes draw glyphs from the registered dataset ``name`` (one that is not per-class); return it.

    Raises
    ------
    KeyError
        ``name`` is not registered (register its record first).
    """
    _REGISTERED[name] = (datasets.get(name), glyph_dataset)
    return glyph_dataset


def glyph_dataset(name: str) -> GlyphDataset | None:
    """Return how scenes draw glyphs from the registered dataset ``name``, or None when they cannot."""
    if name not in datasets.registered():
        return None
    record, registered = _REGISTERED.get(name, (None, None))
    if registered is not None and record in (None, datasets.get(name)):
        return registered
    per_class = datasets.class_glyphs(name)
    if per_class is None:
        return None
    glyphs, classes = per_class
    return GlyphDataset(glyphs=glyphs, classes=classes)


def glyph_datasets() -> list[str]:
    """Return the registered datasets scenes can draw glyphs from, sorted."""
    return [name for name in datasets.registered() if glyph_dataset(name) is not None]
