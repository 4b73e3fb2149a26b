"""`ScatteredGlyphs`: scenes of glyphs scattered over backgrounds, with boxes and labels.

A build spec (see `glyphforge.build`): ``build(ScatteredGlyphs(10_000))`` makes
the dataset in seeded shards through any session. Each scene is a background
(a random crop of a random texture, a random flat colour, or black) with
``min_glyphs`` to ``max_glyphs`` glyphs (EMNIST characters, Omniglot characters,
or characters rendered from Pillow's bundled font) resized to ``glyph_shape``,
coloured, and alpha-composited (alpha = glyph intensity) at positions chosen by
rejection sampling so that no two glyph boxes share more than ``max_overlap`` of
either box's area.

Arrays of a shard of ``n`` scenes (``G = max_glyphs``):

``images``      uint8 ``(n, H, W, 3)``
``n_glyphs``    int64 ``(n,)``
``boxes``       float32 ``(n, G, 4)``: ``(top, left, bottom, right)`` in pixels, bottom
                and right exclusive, the tight box of the glyph's non-zero pixels; -1 pads
``labels``      int64 ``(n, G)``: index into `ScatteredGlyphs.class_names`; -1 pads
``label_names`` str ``(n, G)``: the class name of each glyph; ``""`` pads

A built dataset keeps the sorted class list that ``labels`` index, classes no scene
drew included, as ``ds.metadata["class_names"]``; ``ds[i]`` is ``(image, targets)``
with the other arrays' rows in ``targets`` (see `glyphforge.build.BuiltDataset`).
"""
from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Union

import numpy as np
import PIL
from PIL import ImageColor

from glyphforge.pipelines import composite
from glyphforge.pipelines.font_glyphs import DEFAULT_CHARACTERS, check_characters, render_font_glyphs
from glyphforge.pipelines.resize import resize

#: Bumped whenever the same spec would give different bytes; part of `ScatteredGlyphs.params`.
ALGORITHM_VERSION = 1
GLYPH_SOURCES = ("emnist", "omniglot", "font")
#: Tries per glyph position, and fresh starts of a whole scene, before giving up.
PLACEMENT_ATTEMPTS = 100
PLACEMENT_RESTARTS = 10
#: Side of the square canvas font glyphs are rendered on (at least; see `_font_canvas`).
FONT_CANVAS = 32
OMNIGLOT_DRAWERS = 20

Colour = Union[str, Sequence[int]]


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


@dataclass
class ScatteredGlyphs:
    """Spec of a scattered-glyph scene dataset (build it with `glyphforge.build`).

    Parameters
    ----------
    n_examples
        Number of scenes.
    image_shape
        ``(H, W)`` of each scene.
    glyphs
        ``"emnist"``, ``"omniglot"`` or ``"font"`` (Pillow's bundled font: needs no
        data and no network).
    characters
        The classes: characters for EMNIST and font (a string such as
        ``"0123456789"``), ``"<alphabet>,<n>"`` names for Omniglot; None for all
        (font: digits and ASCII letters). Class names are sorted; ``labels`` index them.
    glyph_shape
        ``(h, w)`` every glyph image is resized to (box filter).
    glyph_shape_jitter
        None, or ``j`` in ``[0, 1)``: each glyph's shape is scaled by a factor drawn
        uniformly from ``[1 - j, 1 + j]`` (rounded; both sides scaled alike).
    min_glyphs, max_glyphs
        Bounds of the number of glyphs per scene (uniform between them).
    max_overlap
        In ``[0, 1]``: the largest area two glyph boxes may share, as a fraction
        of either box's area (0: boxes never intersect).
    backgrounds
        None, ``"all"``, ``"hard"`` (the textures) or background names, a list or
        one space-separated string (see `glyphforge.background_names`): each texture scene is a random crop of
        a random texture (textures smaller than the scene are resized to it).
    background_colours
        None, or colours (Pillow names, ``"#rrggbb"`` or RGB triples) for flat
        backgrounds. Each scene picks uniformly among the textures and these
        colours; with neither, scenes are black.
    colours
        Glyph colours (same forms); each glyph picks one uniformly.
    glyph_example_range
        None, or ``(a, b)`` with ``0 <= a < b <= 1``: only the fraction ``[a, b)`` of
        each class's images is used (EMNIST: as `glyphforge.load_emnist`'s
        ``example_range``; Omniglot: drawers ``ceil(20 a)`` to ``ceil(20 b) - 1``), so
        train and test scenes can use disjoint glyph images.
    emnist_split
        The EMNIST split the characters come from.
    omniglot_sets
        The Omniglot sets the classes come from.
    seed, shard_size
        As for every spec: shard ``i`` draws from ``SeedSequence(seed).spawn(...)[i]``.
    data_dir
        Where glyph data and textures are read from; `glyphforge.build` fills in
        its own when None. Not part of the cache key.

    Examples
    --------
    >>> import glyphforge
    >>> spec = glyphforge.ScatteredGlyphs(2000, glyphs="font", backgrounds="hard")
    >>> scenes = glyphforge.build(spec, session="processes:2")       # doctest: +SKIP
    >>> glyphforge.preview(scenes, n=16, path="scenes.png")          # doctest: +SKIP
    """

    n_examples: int
    _: KW_ONLY
    image_shape: tuple[int, int] = (48, 48)
    glyphs: str = "emnist"
    characters: Union[str, Sequence[str], None] = None
    glyph_shape: tuple[int, int] = (14, 14)
    glyph_shape_jitter: float | None = None
    min_glyphs: int = 1
    max_glyphs: int = 3
    max_overlap: float = 0.2
    backgrounds: Union[str, Sequence[str], None] = None
    background_colours: Sequence[Colour] | None = None
    colours: Sequence[Colour] = ("white",)
    glyph_example_range: tuple[float, float] | None = None
    emnist_split: str = "byclass"
    omniglot_sets: tuple[str, ...] = ("background", "evaluation")
    seed: int = 0
    shard_size: int = 1000
    data_dir: Any = field(default=None, compare=False)

    kind = "scenes"

    def __post_init__(self) -> None:
        for name in ("n_examples", "shard_size"):
            _check_int(name, getattr(self, name), 1)
        _check_int("seed", self.seed, 0)
        self.image_shape = _shape("image_shape", self.image_shape)
        self.glyph_shape = _shape("glyph_shape", self.glyph_shape)
        if self.glyphs not in GLYPH_SOURCES:
            raise ValueError(f"glyphs must be one of {', '.join(GLYPH_SOURCES)}; got {self.glyphs!r}")
        self.characters = self._checked_characters()
        if self.glyph_shape_jitter is not None:
            jitter = self.glyph_shape_jitter
            if isinstance(jitter, bool) or not isinstance(jitter, numbers.Real) or not 0 <= jitter < 1:
                raise ValueError(f"glyph_shape_jitter must be None or a number in [0, 1), got {jitter!r}")
            self.glyph_shape_jitter = float(jitter)
        largest = self._largest_glyph_shape()
        if largest[0] > self.image_shape[0] or largest[1] > self.image_shape[1]:
            raise ValueError(
                f"glyphs of up to {largest[0]}x{largest[1]} (glyph_shape {self.glyph_shape}, jitter "
                f"{self.glyph_shape_jitter}) do not fit in image_shape {self.image_shape}; use a smaller "
                "glyph_shape or glyph_shape_jitter, or a larger image_shape"
            )
        _check_int("min_glyphs", self.min_glyphs, 0)
        _check_int("max_glyphs", self.max_glyphs, max(1, self.min_glyphs))
        overlap = self.max_overlap
        if isinstance(overlap, bool) or not isinstance(overlap, numbers.Real) or not 0 <= overlap <= 1:
            raise ValueError(f"max_overlap must be a number in [0, 1] (a fraction of a box's area), got {overlap!r}")
        self.max_overlap = float(overlap)
        self.backgrounds = _background_names(self.backgrounds)
        if self.background_colours is not None:
            self.background_colours = _colours("background_colours", self.background_colours)
        self.colours = _colours("colours", self.colours)
        self.glyph_example_range = self._checked_example_range()
        self.omniglot_sets = (self.omniglot_sets,) if isinstance(self.omniglot_sets, str) else tuple(self.omniglot_sets)

    # -- the spec protocol ----------------------------------------------------
    def params(self) -> dict[str, Any]:
        """Everything that determines the scenes besides n_examples, seed and shard_size."""
        params: dict[str, Any] = {
            "algorithm": ALGORITHM_VERSION,
            "image_shape": self.image_shape,
            "glyphs": self.glyphs,
            "characters": self.characters,
            "glyph_shape": self.glyph_shape,
            "glyph_shape_jitter": self.glyph_shape_jitter,
            "min_glyphs": self.min_glyphs,
            "max_glyphs": self.max_glyphs,
            "max_overlap": self.max_overlap,
            "backgrounds": self.backgrounds,
            "background_colours": self.background_colours,
            "colours": self.colours,
            "glyph_example_range": self.glyph_example_range,
        }
        if self.glyphs == "emnist":
            params["emnist_split"] = self.emnist_split
        elif self.glyphs == "omniglot":
            params["omniglot_sets"] = self.omniglot_sets
        else:
            params["pillow"] = PIL.__version__  # the font and its rasteriser ship with Pillow
        return params

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """Make ``n`` scenes drawing every random choice from ``rng`` (module docstring)."""
        pool = self.glyph_pool()
        counts = rng.integers(self.min_glyphs, self.max_glyphs + 1, n)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        total = int(counts.sum())
        labels = rng.integers(0, len(pool.class_names), total)
        glyphs, heights, widths = self._glyph_images(pool, labels, rng)
        ink = composite.ink_boxes(glyphs, heights, widths)
        positions, boxes, failed = composite.place_glyphs(
            rng, starts, counts, ink, *self.image_shape, self.max_overlap, PLACEMENT_ATTEMPTS, PLACEMENT_RESTARTS
        )
        if failed >= 0:
            raise ValueError(
                f"could not place {counts[failed]} glyphs in scene {failed} of shard {index}: after "
                f"{PLACEMENT_ATTEMPTS} tries per glyph and {PLACEMENT_RESTARTS} fresh starts, some glyph "
                f"boxes still shared more than max_overlap={self.max_overlap} of their area in a "
                f"{self.image_shape[0]}x{self.image_shape[1]} image. Lower min_glyphs/max_glyphs or "
                "glyph_shape, or raise image_shape or max_overlap"
            )
        colours = np.array(self.colours, np.uint8)[rng.integers(0, len(self.colours), total)]
        background, crop, flat_colours = self._background_choices(rng, n)
        textures = self.textures()
        images = np.empty((n, *self.image_shape, 3), np.uint8)
        composite.composite(
            images, glyphs, starts, counts, ink, positions, colours, background, crop, flat_colours,
            textures.flat, textures.offsets, textures.widths,
        )
        scene = np.repeat(np.arange(n), counts)
        slot = np.arange(total) - starts[scene]
        padded_boxes = np.full((n, self.max_glyphs, 4), -1, np.float32)
        padded_boxes[scene, slot] = boxes
        padded_labels = np.full((n, self.max_glyphs), -1, np.int64)
        padded_labels[scene, slot] = labels
        names = np.array(pool.class_names)
        label_names = np.full((n, self.max_glyphs), "", names.dtype)
        label_names[scene, slot] = names[labels]
        return {
            "images": images,
            "n_glyphs": counts.astype(np.int64),
            "boxes": padded_boxes,
            "labels": padded_labels,
            "label_names": label_names,
        }

    def metadata(self) -> dict[str, Any]:
        """What a built dataset keeps beside its arrays: ``class_names``, which ``labels`` index."""
        return {"class_names": list(self.class_names())}

    # -- data -------------------------------------------------------------------
    def class_names(self) -> tuple[str, ...]:
        """The sorted class names that ``labels`` index (reads the glyph data, except for font)."""
        return self.glyph_pool().class_names

    def glyph_pool(self) -> GlyphPool:
        """The glyph images of this spec, loaded once per process."""
        # Without jitter every glyph has glyph_shape: load the cached box-resized variant
        # (the same pixels as resizing each glyph, in a fraction of the memory).
        return _glyph_pool(
            self.glyphs, self.characters, self.emnist_split, self.omniglot_sets, self.glyph_example_range,
            self.glyph_shape if self.glyph_shape_jitter is None else None,
            None if self.data_dir is None else str(self.data_dir),
        )

    def textures(self) -> Textures:
        """The background textures of this spec (an empty set when there are none), loaded once per process."""
        return _textures(self.backgrounds, self.image_shape, None if self.data_dir is None else str(self.data_dir))

    # -- per-shard steps ----------------------------------------------------------
    def _glyph_images(
        self, pool: GlyphPool, labels: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pick (or render) one source image per label and resize it to its glyph shape."""
        total = len(labels)
        if pool.images is None:
            sources = render_font_glyphs(pool.class_names, labels, rng, _font_canvas(self._largest_glyph_shape()))
        else:
            picks = pool.starts[labels] + (rng.random(total) * pool.counts[labels]).astype(np.int64)
            sources = pool.images[picks]
        if self.glyph_shape_jitter is None:
            heights = np.full(total, self.glyph_shape[0], np.int64)
            widths = np.full(total, self.glyph_shape[1], np.int64)
        else:
            scale = rng.uniform(1 - self.glyph_shape_jitter, 1 + self.glyph_shape_jitter, total)
            heights = np.maximum(1, np.rint(self.glyph_shape[0] * scale)).astype(np.int64)
            widths = np.maximum(1, np.rint(self.glyph_shape[1] * scale)).astype(np.int64)
        glyphs = np.zeros((total, int(heights.max(initial=1)), int(widths.max(initial=1))), np.uint8)
        for h, w in sorted(set(zip(heights.tolist(), widths.tolist()))):
            chosen = np.flatnonzero((heights == h) & (widths == w))
            glyphs[chosen, :h, :w] = resize(sources[chosen], (h, w), batch=True)
        return glyphs, heights, widths

    def _background_choices(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return each scene's texture index (-1: flat), crop corner and flat colour."""
        textures = self.textures()
        n_textures = len(textures.heights)
        flat = np.array(self.background_colours or [], np.uint8).reshape(-1, 3)
        crop = np.zeros((n, 2), np.int64)
        if n_textures + len(flat) == 0:
            return np.full(n, -1, np.int64), crop, np.zeros((n, 3), np.uint8)
        choice = rng.integers(0, n_textures + len(flat), n)
        background = np.where(choice < n_textures, choice, -1)
        flat_colours = np.zeros((n, 3), np.uint8)
        flat_colours[background < 0] = flat[choice[background < 0] - n_textures]
        textured = background >= 0
        room = np.stack([textures.heights, textures.widths], 1)[background[textured]] - self.image_shape + 1
        crop[textured] = (rng.random(room.shape) * room).astype(np.int64)
        return background, crop, flat_colours

    # -- validation helpers ---------------------------------------------------
    def _largest_glyph_shape(self) -> tuple[int, int]:
        grow = 1 + (self.glyph_shape_jitter or 0.0)
        return int(np.rint(self.glyph_shape[0] * grow)), int(np.rint(self.glyph_shape[1] * grow))

    def _checked_characters(self) -> tuple[str, ...] | None:
        characters = self.characters
        if characters is None:
            return tuple(DEFAULT_CHARACTERS) if self.glyphs == "font" else None
        if isinstance(characters, str) and self.glyphs == "omniglot":
            characters = [characters]
        names = list(characters)
        if not names:
            raise ValueError("characters is empty; give at least one class, or None for all")
        if any(not isinstance(name, str) for name in names):
            raise ValueError(f"characters must be strings, got {characters!r}")
        if self.glyphs != "omniglot" and any(len(name) != 1 for name in names):
            raise ValueError(
                f"{self.glyphs} characters must be single characters such as '0123456789', got {characters!r}"
            )
        names = sorted(set(names))
        if self.glyphs == "font":
            check_characters(names)
        return tuple(names)

    def _checked_example_range(self) -> tuple[float, float] | None:
        value = self.glyph_example_range
        if value is None:
            return None
        if self.glyphs == "font":
            raise ValueError(
                "glyph_example_range selects stored glyph images, but font glyphs are rendered fresh; "
                "leave it None with glyphs='font'"
            )
        try:
            low, high = (float(part) for part in value)
        except (TypeError, ValueError):
            raise ValueError(f"glyph_example_range must be a pair (a, b), got {value!r}") from None
        if not 0 <= low < high <= 1:
            raise ValueError(f"glyph_example_range must satisfy 0 <= a < b <= 1, got {value!r}")
        return low, high


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _shape(name: str, value: Any) -> tuple[int, int]:
    try:
        shape = tuple(value)
    except TypeError:
        shape = ()
    if len(shape) != 2 or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 for s in shape):
        raise ValueError(f"{name} must be (height, width) with positive integers, got {value!r}")
    return int(shape[0]), int(shape[1])


def _colours(name: str, value: Any) -> tuple[tuple[int, int, int], ...]:
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ValueError(f"{name} is empty; give at least one colour")
    if len(items) == 3 and all(isinstance(item, numbers.Integral) for item in items):
        raise ValueError(f"{name} must be a list of colours; for one RGB colour write [{tuple(items)}]")
    result = []
    for item in items:
        if isinstance(item, str):
            try:
                rgb = ImageColor.getrgb(item)[:3]
            except ValueError:
                raise ValueError(
                    f"{name} has {item!r}, which is not a colour: use a name such as 'white', '#rrggbb' "
                    "or an (r, g, b) triple"
                ) from None
        else:
            rgb = tuple(item)
            if len(rgb) != 3 or any(
                isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= c <= 255 for c in rgb
            ):
                raise ValueError(f"{name} has {item!r}; an RGB colour is three integers in 0..255")
        result.append(tuple(int(c) for c in rgb))
    return tuple(result)


def _background_names(value: Any) -> str | tuple[str, ...] | None:
    if value is None or value in ("all", "hard"):
        return value
    names = value.split() if isinstance(value, str) else list(value)
    if not names or any(not isinstance(name, str) for name in names):
        raise ValueError(f"backgrounds must be None, 'all', 'hard' or a list of background names, got {value!r}")
    return tuple(names)


def _font_canvas(largest_glyph: tuple[int, int]) -> int:
    """Font glyphs are rendered at least as large as the largest glyph they become."""
    return max(FONT_CANVAS, *largest_glyph)


@functools.lru_cache(maxsize=2)
def _glyph_pool(
    glyphs: str,
    characters: tuple[str, ...] | None,
    emnist_split: str,
    omniglot_sets: tuple[str, ...],
    example_range: tuple[float, float] | None,
    shape: tuple[int, int] | None,
    data_dir: str | None,
) -> GlyphPool:
    if glyphs == "font":
        return GlyphPool(class_names=characters)
    if glyphs == "emnist":
        from glyphforge.datasets.emnist import load_emnist

        images, labels, names = load_emnist(
            characters, split=emnist_split, shape=shape, example_range=example_range, seed=0, data_dir=data_dir
        )
    else:
        from glyphforge.datasets.omniglot import load_omniglot

        drawers = None
        if example_range is not None:
            first, stop = (math.ceil(fraction * OMNIGLOT_DRAWERS) for fraction in example_range)
            drawers = list(range(first, stop))
            if not drawers:
                raise ValueError(
                    f"glyph_example_range {example_range} holds none of Omniglot's {OMNIGLOT_DRAWERS} drawers; "
                    f"make it at least 1/{OMNIGLOT_DRAWERS} wide"
                )
        images, labels, class_map = load_omniglot(
            None if characters is None else list(characters), sets=omniglot_sets, indices=drawers, seed=0,
            shape=shape, method="box", data_dir=data_dir,
        )
        names = sorted(class_map, key=class_map.__getitem__)
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
def _textures(names: str | tuple[str, ...] | None, image_shape: tuple[int, int], data_dir: str | None) -> Textures:
    if names is None:
        images: list[np.ndarray] = []
    else:
        from glyphforge.datasets.backgrounds import load_backgrounds

        images = load_backgrounds(names if isinstance(names, str) else list(names), data_dir=data_dir)
    if not images:
        empty = np.zeros(0, np.int64)
        return Textures(np.zeros(0, np.uint8), empty, empty, empty)
    return Textures.from_images(images, image_shape)
