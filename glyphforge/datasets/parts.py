"""What the layers above read of a registered dataset besides its record: a per-class dataset's glyphs and class
names, and the own copies a read of a dataset uses.

Scenes draw glyphs from datasets and key their builds by the files those are read from; they
use these functions (through `glyphforge.datasets`), never a dataset's own modules. Each imports
the dataset's code on use: reading the registry imports none.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from glyphforge.datasets.registry import declaration as per_class_declaration

if TYPE_CHECKING:
    from glyphforge.context import DataContext
    from glyphforge.pipelines.resource import Resource


def class_glyphs(name: str) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """The glyph images and the class names of the per-class dataset ``name``, bound to its declaration; None when
    ``name`` is not a per-class dataset.

    The first is ``(classes, *, example_range, shape, context, **config) -> (images, labels, class_names)``,
    reading the cache only; the second ``(**config) -> list[str]``, reading no data (``config``: the
    declaration's config keyword, EMNIST's ``split``).
    """
    declaration = per_class_declaration(name)
    if declaration is None:
        return None
    from glyphforge.datasets.classes.args import class_names
    from glyphforge.datasets.classes.files import bind
    from glyphforge.datasets.classes.load import glyph_images

    return (bind(glyph_images, name, f"{declaration.ident}_glyph_images"),
            bind(class_names, name, f"{declaration.ident}_classes"))


def own_files(name: str, context: DataContext, **options: Any) -> dict[str, str]:
    """The own copies a read of dataset ``name`` with ``context`` and ``options`` uses: ``{file: "sha256:<hex>"}``.

    Own copies are the files used unverified that are not upstream's
    (`glyphforge.datasets.own_copies`): with ``context.verify``, the copy loads serve; without, the
    copy a prepare chooses (files placed in ``raw/``). A per-class dataset reads all its files,
    Omniglot those of its ``sets``, the backgrounds those of their ``names``; the files of other
    datasets are not glyphforge's to check. Empty: upstream's (or unchecked) files only.
    """
    declaration = per_class_declaration(name)
    resources: Mapping[str, Resource]
    if declaration is not None:
        resources = declaration.resources
    elif name == "omniglot":
        from glyphforge.datasets.omniglot.prepare import DEFAULT_SETS, RESOURCES, check_sets

        resources = {each: RESOURCES[each] for each in check_sets(options.get("sets", DEFAULT_SETS))}
    elif name == "backgrounds":
        from glyphforge.datasets.backgrounds import IMAGES, check_names

        resources = {each: IMAGES[each] for each in check_names(options.get("names", "all"))}
    else:
        return {}
    from glyphforge.datasets import own_copies

    if context.verify:
        return own_copies.in_use(name, resources, context).own
    return own_copies.chosen(name, resources, context, {}).own
