"""Where scenes get their glyphs and textures: the registered datasets, read from the cache.

`prepare_sources` runs on the build's driver (`ScatteredGlyphs.prepare`): it prepares
the glyph dataset (at the glyph shape) and the textures, fetching what is missing.
`glyph_pool` and `textures` run in every shard worker and only read the cache
(loaded once per process): a worker never downloads, and data that is missing
fails the shard with a message naming the ``prepare-data`` command to run.

Glyph sources are ``"font"`` (Pillow's bundled font: needs no data) and every
registered dataset scenes can draw glyphs from (`glyphforge.scenes.glyph_datasets`).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from glyphforge.cache import Entry
from glyphforge.context import DataContext
from glyphforge.datasets import dataset_part, needed, resolve
from glyphforge.scenes import own_sources as own_files
from glyphforge.scenes.glyph_datasets import GlyphDataset, glyph_dataset, glyph_datasets

FONT = "font"
#: Procedural shapes (`glyphforge.scenes.shapes`): like the font, they need no data.
SHAPES = "shapes"
#: The glyph sources drawn per shard, which read and prepare nothing.
DRAWN = (FONT, SHAPES)

#: Glyph options as a hashable, canonical value: sorted ``(name, value)`` pairs, lists made tuples.
FrozenOptions = tuple[tuple[str, Any], ...]


def _glyph_dataset(dataset: str) -> GlyphDataset:
    """How scenes draw glyphs from ``dataset``; a ValueError names the glyph sources when they cannot."""
    found = glyph_dataset(dataset)
    if found is None:
        raise ValueError(f"scenes cannot draw glyphs from {dataset!r}: use one of {', '.join(glyph_sources())}")
    return found


def glyph_sources() -> tuple[str, ...]:
    """Return the glyph sources scenes accept: the registered glyph datasets, ``"font"`` and ``"shapes"``."""
    return (*glyph_datasets(), *DRAWN)


@dataclass(frozen=True)
class GlyphPool:
    """The glyph images a spec samples from, grouped by class.

    ``images`` is ``None`` for font glyphs (rendered per shard); otherwise class
    ``c`` owns ``images[starts[c] : starts[c] + counts[c]]``.
    """

    class_names: tuple[str, ...]
    images: np.ndarray | None = None
    starts: np.ndarray | None = None
    counts: np.ndarray | None = None


@dataclass(frozen=True)
class Textures:
    """Background textures in the flat layout of `glyphforge.pipelines.composite`."""

    flat: np.ndarray
    offsets: np.ndarray
    heights: np.ndarray
    widths: np.ndarray

    @classmethod
    def from_images(cls, images: Sequence[np.ndarray], image_shape: tuple[int, int]) -> Textures:
        """Flatten RGB ``images``, first resizing (box) any smaller than ``image_shape`` to it."""
        from glyphforge.pipelines.resize import resize

        fitted = [
            resize(image, image_shape, batch=False)
            if image.shape[0] < image_shape[0] or image.shape[1] < image_shape[1]
            else image
            for image in images
        ]
        sizes = np.array([image.size for image in fitted], np.int64)
        return cls(
            flat=np.concatenate([np.ascontiguousarray(image, np.uint8).ravel() for image in fitted]),
            offsets=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
            heights=np.array([image.shape[0] for image in fitted], np.int64),
            widths=np.array([image.shape[1] for image in fitted], np.int64),
        )


def split_classes(glyphs: str, text: str, options: FrozenOptions) -> list[str]:
    """Return the classes a string names: its characters, or itself when it is one multi-character class name.

    ``"0123"`` is four EMNIST classes; ``"Bag"`` is one Fashion-MNIST class (not ``B``,
    ``a``, ``g``), as is ``"T-shirt/top"``. Several such names are given as a list (on the
    command line: separated by commas).
    """
    part = _glyph_dataset(glyphs).classes if glyphs not in DRAWN else None
    if part is not None and len(text) > 1 and text in resolve(part)(**dict(options)):
        return [text]
    return list(text)


def check_names(
    glyphs: str, characters: Sequence[str] | None, options: FrozenOptions, backgrounds: str | Sequence[str] | None
) -> None:
    """Refuse unknown background names, and glyph classes where the dataset knows them without data.

    Reads nothing and fetches nothing: the build's driver calls it first, so a typo fails
    at once (Omniglot's classes, known only from its prepared data, are checked after
    preparing, still on the driver).
    """
    if backgrounds is not None:
        needed("backgrounds", names=backgrounds)  # a ValueError names an unknown background
    if glyphs == SHAPES and characters is not None:
        from glyphforge.scenes.shapes import check_shape_names

        check_shape_names(tuple(characters))
    if glyphs in DRAWN or characters is None:
        return
    part = _glyph_dataset(glyphs).classes
    if part is not None:
        known = resolve(part)(**dict(options))
        unknown = sorted(set(characters) - set(known))
        if unknown:
            settings = ", ".join(f"{name}={value!r}" for name, value in options) or "the default options"
            single = all(len(name) == 1 for name in known)
            listed = "".join(known) if single else ", ".join(known)
            hint = "" if single else (
                f". Give one name as it is (e.g. {known[-1]!r}) and several separated by commas (e.g. "
                f"{','.join(known[:2])!r}); a string without commas that is not one name is read as characters"
            )
            raise ValueError(f"unknown {glyphs} classes {unknown} ({settings}): the known ones are {listed}{hint}")


def prepare_sources(
    glyphs: str, options: FrozenOptions, shape: tuple[int, int] | None,
    backgrounds: str | Sequence[str] | None, context: DataContext,
) -> list[Entry]:
    """Prepare (fetch and convert, when missing) the glyph dataset at ``shape`` and the textures, within ``context``;
    return their entries (what the shards read).

    A source whose copy in use is an own copy (`own_sources`) is prepared from it, unchecked, as loads do.
    """
    own = own_sources(glyphs, options, backgrounds, context)
    unchecked = dataclasses.replace(context, verify=False)
    entries: list[Entry] = []
    if glyphs not in DRAWN:
        prepare = dataset_part(glyphs, "prepare", unchecked if "glyphs" in own else context)
        entries += prepare(shapes=[] if shape is None else [shape], **_glyph_dataset(glyphs).prepare, **dict(options))
    if backgrounds is not None:
        entries += dataset_part("backgrounds", "prepare", unchecked if "backgrounds" in own else context)(
            names=backgrounds if isinstance(backgrounds, str) else list(backgrounds)
        )
    return entries


def own_sources(
    glyphs: str, options: FrozenOptions, backgrounds: str | Sequence[str] | None, context: DataContext,
) -> dict[str, dict[str, str]]:
    """The own copies (unverified) the glyphs and textures are read from, ``{"glyphs" | "backgrounds": {file:
    "sha256:<hex>"}}``, only those in use (empty: upstream's; see `glyphforge.scenes.own_sources`)."""
    found = {}
    if glyphs not in DRAWN:
        found["glyphs"] = own_files.glyph_files(glyphs, dict(options), context)
    if backgrounds is not None:
        found["backgrounds"] = own_files.texture_files(backgrounds, context)
    return {source: files for source, files in found.items() if files}


@functools.lru_cache(maxsize=2)
def glyph_pool(
    glyphs: str,
    characters: tuple[str, ...] | None,
    options: FrozenOptions,
    example_range: tuple[float, float] | None,
    shape: tuple[int, int] | None,
    context: DataContext,
) -> GlyphPool:
    """Return the glyph images of a scenes spec, grouped by class (loaded once per process).

    ``shape`` None keeps each source's stored shape (scenes resize every glyph themselves).
    """
    if glyphs in DRAWN:
        if characters is None:
            raise ValueError(f"{glyphs} glyphs need their characters")
        return GlyphPool(class_names=characters)
    source = functools.partial(resolve(_glyph_dataset(glyphs).glyphs), context=context)
    images, labels, names = source(characters, example_range=example_range, shape=shape, **dict(options))
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=len(names)).astype(np.int64)
    if not counts.all():
        empty = [names[c] for c in np.flatnonzero(counts == 0)]
        raise ValueError(
            f"classes {empty} have no {glyphs} images in glyph_example_range {example_range}; widen the range"
        )
    return GlyphPool(
        class_names=tuple(str(name) for name in names),
        images=np.ascontiguousarray(images[order]),
        starts=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
        counts=counts,
    )


@functools.lru_cache(maxsize=2)
def textures(names: str | tuple[str, ...] | None, image_shape: tuple[int, int], context: DataContext) -> Textures:
    """Return the background textures ``names`` (none: an empty set), read from the cache of ``context`` once per
    process."""
    images: list[np.ndarray] = []
    if names is not None:
        load = dataset_part("backgrounds", "load", DataContext.resolve(context, download=False))
        images, _, _ = load(names if isinstance(names, str) else list(names))
    if not images:
        empty = np.zeros(0, np.int64)
        return Textures(np.zeros(0, np.uint8), empty, empty, empty)
    return Textures.from_images(images, image_shape)

