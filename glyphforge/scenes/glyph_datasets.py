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

from glyphforge.datasets import registry

#: The per-class dataset's glyphs.
_GLYPHS = "glyphforge.datasets.classes.load:glyph_images"
#: The per-class dataset's class names, known without any data.
_CLASSES = "glyphforge.datasets.classes.args:class_names"


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

    glyphs: registry.Ref
    prepare: Mapping[str, Any] = field(default_factory=dict)
    classes: registry.Ref | None = None


#: The glyph datasets that are not per-class, by name: glyphforge's own, and those registered at run time with
#: the record they were registered for (a registration ends when that record is replaced or unregistered).
_REGISTERED: dict[str, tuple[registry.DatasetRecord | None, GlyphDataset]] = {
    "omniglot": (None, GlyphDataset("glyphforge.datasets.omniglot.dataset:glyph_images", prepare={"method": "box"})),
}


def register_glyphs(name: str, glyph_dataset: GlyphDataset) -> GlyphDataset:
    """Let scenes draw glyphs from the registered dataset ``name`` (one that is not per-class); return it.

    Raises
    ------
    KeyError
        ``name`` is not registered (register its record first).
    """
    _REGISTERED[name] = (registry.get(name), glyph_dataset)
    return glyph_dataset


def glyph_dataset(name: str) -> GlyphDataset | None:
    """Return how scenes draw glyphs from the registered dataset ``name``, or None when they cannot."""
    if name not in registry.registered():
        return None
    record, registered = _REGISTERED.get(name, (None, None))
    if registered is not None and record in (None, registry.get(name)):
        return registered
    declaration = registry.declaration(name)
    if declaration is None:
        return None
    from glyphforge.datasets.classes.files import bind

    return GlyphDataset(glyphs=bind(registry.resolve(_GLYPHS), name, f"{declaration.ident}_glyph_images"),
                        classes=bind(registry.resolve(_CLASSES), name, f"{declaration.ident}_classes"))


def glyph_datasets() -> list[str]:
    """Return the registered datasets scenes can draw glyphs from, sorted."""
    return [name for name in registry.registered() if glyph_dataset(name) is not None]
