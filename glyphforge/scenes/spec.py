"""`ScatteredGlyphs`: scenes of glyphs scattered over backgrounds, with boxes and labels.

A build spec (see `glyphforge.builds.builder`): ``build(ScatteredGlyphs(10_000))``
makes the dataset in seeded shards through any session. Each scene is a background
(a random crop of a random texture, a random flat colour, or black) with
``min_glyphs`` to ``max_glyphs`` glyphs (from a registered glyph dataset such as
EMNIST or Omniglot, or characters rendered from Pillow's bundled font; see
`glyphforge.scenes.sources`) resized to ``glyph_shape``,
coloured, and alpha-composited (alpha = glyph intensity) at positions chosen by
rejection sampling so that no two glyph boxes share more than ``max_overlap`` of
either box's area.

Arrays of a shard of ``n`` scenes (``G = max_glyphs``):

``images``      uint8 ``(n, H, W, 3)``
``n_glyphs``    int64 ``(n,)``
``boxes``       float32 ``(n, G, 4)``: ``(top, left, bottom, right)`` in pixels, bottom
                and right exclusive, the tight box of the glyph's non-zero pixels; -1 pads
``labels``      int64 ``(n, G)``: index into `ScatteredGlyphs.class_names`; -1 pads

Class names are never stored per glyph (strings would stop torch's default collate): a
built dataset keeps the sorted class list that ``labels`` index, classes no scene drew
included, as ``ds.classes`` (``ds.metadata["class_names"]``); ``ds[i]`` is ``(image, targets)``
with the other arrays' rows in ``targets`` (see `glyphforge.builds.dataset.BuiltDataset`), so
``DataLoader(ds, batch_size=64, shuffle=True)`` batches scenes as they are.
"""
from __future__ import annotations

import contextlib
import functools
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_example_range, check_int, check_real, check_shape
from glyphforge.builds.spec import SpecError
from glyphforge.context import DataContext, as_context
from glyphforge.scenes import sources as scene_sources
from glyphforge.scenes.sources import FONT, FrozenOptions, GlyphPool, Textures

#: Bumped whenever the same spec would give different bytes; part of `ScatteredGlyphs.params`.
#: 2: glyph options replace emnist_split/omniglot_sets in the params; Omniglot's
#: glyph_example_range selects drawers by the rule every dataset shares (`example_bounds`).
#: 3: glyph positions are drawn from ``rng.random()`` (`composite.place`), not ``rng.integers``.
#: 4: no ``label_names`` array (the names are ``ds.classes``, which ``labels`` index).
ALGORITHM_VERSION = 4
#: Tries per glyph position, and fresh starts of a whole scene, before giving up.
PLACEMENT_ATTEMPTS = 100
PLACEMENT_RESTARTS = 10
#: Side of the square canvas font glyphs are rendered on (at least; see `_font_canvas`).
FONT_CANVAS = 32
#: The most scenes a shard may hold: a shard is made in one worker's memory (100,000 48x48 scenes: 0.7 GB).
MAX_SHARD_SIZE = 100_000

Colour = str | Sequence[int]


@dataclass
class ScatteredGlyphs:
    """Spec of a scattered-glyph scene dataset (build it with `glyphforge.build`).

    Parameters
    ----------
    n_examples
        Number of scenes.
    image_shape
        ``(H, W)`` of each scene; each side at most `glyphforge._checks.MAX_SIDE` (4096).
    glyphs
        ``"emnist"``, ``"omniglot"`` (any registered glyph dataset, see
        `glyphforge.scenes.sources.glyph_sources`) or ``"font"`` (Pillow's
        bundled font: needs no data and no network).
    characters
        The classes: characters for EMNIST and font (a string such as
        ``"0123456789"``), class names for Fashion-MNIST and KMNIST (a list, or one name
        such as ``"Bag"`` as a string), ``"<alphabet>,<n>"`` names for Omniglot; None for
        all (font: digits and ASCII letters). Class names are sorted; ``labels`` index them.
    glyph_options
        Keywords for the glyph dataset's prepare and glyph reader, e.g.
        ``{"split": "letters"}`` for EMNIST or ``{"sets": ["small1"]}`` for Omniglot;
        empty: the dataset's defaults (EMNIST ``byclass``; Omniglot ``background``
        and ``evaluation``).
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
        None, or ``(a, b)`` with ``0 <= a < b <= 1``: the glyph dataset's
        ``example_range`` (every dataset: images ``[int(a n), int(b n))`` of each
        class's ``n``; Omniglot: of its 20 drawers), so train and test scenes can use
        disjoint glyph images.
    seed, shard_size
        As for every spec: shard ``i`` draws from ``SeedSequence(seed).spawn(...)[i]``.

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
    characters: str | Sequence[str] | None = None
    glyph_shape: tuple[int, int] = (14, 14)
    glyph_shape_jitter: float | None = None
    min_glyphs: int = 1
    max_glyphs: int = 3
    max_overlap: float = 0.2
    backgrounds: str | Sequence[str] | None = None
    background_colours: Sequence[Colour] | None = None
    colours: Sequence[Colour] = ("white",)
    glyph_example_range: tuple[float, float] | None = None
    glyph_options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    shard_size: int = 1000

    kind = "scenes"

    def __post_init__(self) -> None:
        check_int("n_examples", self.n_examples, 1)
        check_int("shard_size", self.shard_size, 1, MAX_SHARD_SIZE)
        check_int("seed", self.seed, 0)
        self.image_shape = check_shape(self.image_shape, "image_shape")
        self.glyph_shape = check_shape(self.glyph_shape, "glyph_shape")
        sources = scene_sources.glyph_sources()
        if self.glyphs not in sources:
            raise ValueError(f"glyphs must be one of {', '.join(sources)}; got {self.glyphs!r}")
        self.glyph_options = self._checked_glyph_options()
        self.characters = self._checked_characters()
        if self.glyph_shape_jitter is not None:
            self.glyph_shape_jitter = check_real("glyph_shape_jitter", self.glyph_shape_jitter, 0, 1,
                                                 high_inclusive=False)
        largest = self._largest_glyph_shape()
        if largest[0] > self.image_shape[0] or largest[1] > self.image_shape[1]:
            raise ValueError(
                f"glyphs of up to {largest[0]}x{largest[1]} (glyph_shape {self.glyph_shape}, jitter "
                f"{self.glyph_shape_jitter}) do not fit in image_shape {self.image_shape}; use a smaller "
                "glyph_shape or glyph_shape_jitter, or a larger image_shape"
            )
        check_int("min_glyphs", self.min_glyphs, 0)
        check_int("max_glyphs", self.max_glyphs, max(1, self.min_glyphs))
        self.max_overlap = check_real("max_overlap (a fraction of a box's area)", self.max_overlap, 0, 1)
        self.backgrounds = _background_names(self.backgrounds)
        if self.background_colours is not None:
            self.background_colours = _colours("background_colours", self.background_colours)
        self.colours = _colours("colours", self.colours)
        self.glyph_example_range = self._checked_example_range()

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
            "glyph_options": dict(self.glyph_options),
        }
        if self.glyphs == FONT:
            import PIL

            params["pillow"] = PIL.__version__  # the font and its rasteriser ship with Pillow
        return params

    def own_sources(self, context: DataContext | PathLike) -> dict[str, dict[str, str]]:
        """The own copies (unverified) the glyphs and textures would be read from (`scene_sources.own_sources`):
        `glyphforge.build` keys the entry by them besides `params` (none: upstream's, the key of `params`)."""
        context = as_context(context)
        with self._spec_errors():  # an unknown name is the spec's fault, found here before prepare
            scene_sources.check_names(self.glyphs, self.characters, self._frozen_options(), self.backgrounds)
            return scene_sources.own_sources(self.glyphs, self._frozen_options(), self.backgrounds, context)

    def prepare(self, context: DataContext | PathLike) -> None:
        """Fetch and convert what the shards read, then check the classes and backgrounds against it.

        `glyphforge.build` calls it on the driver before fanning out, with the build's
        `~glyphforge.context.DataContext` (its mirrors, ``offline`` and ``verify`` reach the
        glyph dataset's and the backgrounds' prepare); a data dir path is accepted too (the
        environment's fetch settings). Shard workers then only read the cache, and an
        unknown class or background name fails here (a `SpecError`), before any shard runs.
        """
        context = as_context(context)
        data_dir = context.data_dir
        with self._spec_errors():
            scene_sources.check_names(self.glyphs, self.characters, self._frozen_options(), self.backgrounds)
            scene_sources.prepare_sources(
                self.glyphs, self._frozen_options(), self._pool_shape(), self.backgrounds, context
            )
            self.class_names(data_dir)  # loads the glyphs here once: unknown classes are named now
            self.textures(data_dir)
            # One scene made here compiles the exact kernels the shards run (or loads them from numba's
            # on-disk cache): a session's workers then load them instead of each compiling them. It also
            # finds constraints no scene can meet (glyphs that cannot be placed) before any shard runs.
            self.make_shard(0, np.random.default_rng(0), 1, data_dir=data_dir)

    @contextlib.contextmanager
    def _spec_errors(self) -> Iterator[None]:
        """Turn a plain ValueError raised inside (a bad name or option) into a `SpecError` naming this spec."""
        try:
            yield
        except ValueError as error:
            if type(error) is not ValueError:  # data errors are ValueError subclasses: not the arguments' fault
                raise
            raise SpecError(f"{self.kind} spec: {error}") from None

    def make_shard(
        self, index: int, rng: np.random.Generator, n: int, *, data_dir: PathLike | None = None
    ) -> dict[str, np.ndarray]:
        """Make ``n`` scenes drawing every random choice from ``rng`` (module docstring).

        ``data_dir`` is where the prepared glyphs and textures are read from (the
        build's data dir; None: the default data dir).
        """
        from glyphforge.pipelines import composite  # numba: imported where scenes are made, not specified

        pool = self.glyph_pool(data_dir)
        counts = rng.integers(self.min_glyphs, self.max_glyphs + 1, n)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        total = int(counts.sum())
        labels = rng.integers(0, len(pool.class_names), total)
        glyphs, heights, widths = self._glyph_images(pool, labels, rng)
        ink = np.empty((total, 4), np.int64)  # the kernels' arrays are made here: numba compiles no allocation
        composite.ink_boxes(glyphs, heights, widths, ink)
        positions, boxes = np.zeros((total, 2), np.int64), np.zeros((total, 4), np.int64)
        failed = composite.place(
            rng, starts, counts, ink, *self.image_shape, self.max_overlap, PLACEMENT_ATTEMPTS, PLACEMENT_RESTARTS,
            positions, boxes,
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
        textures = self.textures(data_dir)
        background, crop, flat_colours = self._background_choices(rng, n, textures)
        images = np.empty((n, *self.image_shape, 3), np.uint8)
        composite.composite(
            images.reshape(n, self.image_shape[0], -1), glyphs, starts, counts, ink, positions, colours, background,
            crop, flat_colours, textures.flat, textures.offsets, textures.widths,
        )
        scene = np.repeat(np.arange(n), counts)
        slot = np.arange(total) - starts[scene]
        padded_boxes = np.full((n, self.max_glyphs, 4), -1, np.float32)
        padded_boxes[scene, slot] = boxes
        padded_labels = np.full((n, self.max_glyphs), -1, np.int64)
        padded_labels[scene, slot] = labels
        return {"images": images, "n_glyphs": counts.astype(np.int64), "boxes": padded_boxes, "labels": padded_labels}

    def metadata(self, *, data_dir: PathLike | None = None) -> dict[str, Any]:
        """What a built dataset keeps beside its arrays: ``class_names``, which ``labels`` index (``ds.classes``)."""
        return {"class_names": list(self.class_names(data_dir))}

    # -- data -------------------------------------------------------------------
    def class_names(self, data_dir: PathLike | None = None) -> tuple[str, ...]:
        """The sorted class names that ``labels`` index (reads the glyph data, except for font)."""
        return self.glyph_pool(data_dir).class_names

    def glyph_pool(self, data_dir: PathLike | None = None) -> GlyphPool:
        """The glyph images of this spec, read from the cache of ``data_dir`` once per process."""
        return scene_sources.glyph_pool(
            self.glyphs, self.characters, self._frozen_options(), self.glyph_example_range, self._pool_shape(),
            as_context(data_dir),
        )

    def textures(self, data_dir: PathLike | None = None) -> Textures:
        """The background textures of this spec (an empty set when there are none), read once per process."""
        return scene_sources.textures(self.backgrounds, self.image_shape, as_context(data_dir))

    def _pool_shape(self) -> tuple[int, int] | None:
        # Without jitter every glyph has glyph_shape: read the cached box-resized variant
        # (the same pixels as resizing each glyph, in a fraction of the memory).
        return self.glyph_shape if self.glyph_shape_jitter is None else None

    def _frozen_options(self) -> FrozenOptions:
        return tuple(
            (name, tuple(value) if isinstance(value, list) else value)
            for name, value in sorted(self.glyph_options.items())
        )

    # -- per-shard steps ----------------------------------------------------------
    def _glyph_images(
        self, pool: GlyphPool, labels: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pick (or render) one source image per label and resize it to its glyph shape."""
        from glyphforge.pipelines.font_glyphs import render_font_glyphs, shrink_rendered
        from glyphforge.pipelines.resize import resize

        total = len(labels)
        shrink: Callable[[np.ndarray, tuple[int, int]], np.ndarray]
        if pool.images is None or pool.starts is None or pool.counts is None:  # font glyphs: rendered here
            sources = render_font_glyphs(pool.class_names, labels, rng, _font_canvas(self._largest_glyph_shape()))
            shrink = shrink_rendered  # the same pixels as resize's box, without compiling its kernel
        else:
            picks = pool.starts[labels] + (rng.random(total) * pool.counts[labels]).astype(np.int64)
            sources = pool.images[picks]
            shrink = functools.partial(resize, batch=True)
        if self.glyph_shape_jitter is None:
            heights = np.full(total, self.glyph_shape[0], np.int64)
            widths = np.full(total, self.glyph_shape[1], np.int64)
        else:
            scale = rng.uniform(1 - self.glyph_shape_jitter, 1 + self.glyph_shape_jitter, total)
            heights = np.maximum(1, np.rint(self.glyph_shape[0] * scale)).astype(np.int64)
            widths = np.maximum(1, np.rint(self.glyph_shape[1] * scale)).astype(np.int64)
        glyphs = np.zeros((total, int(heights.max(initial=1)), int(widths.max(initial=1))), np.uint8)
        for h, w in sorted(set(zip(heights.tolist(), widths.tolist(), strict=True))):
            chosen = np.flatnonzero((heights == h) & (widths == w))
            glyphs[chosen, :h, :w] = shrink(sources[chosen], (h, w))
        return glyphs, heights, widths

    def _background_choices(
        self, rng: np.random.Generator, n: int, textures: Textures
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return each scene's texture index (-1: flat), crop corner and flat colour."""
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
        from glyphforge.pipelines.font_glyphs import DEFAULT_CHARACTERS, check_characters

        characters = self.characters
        if characters is None:
            return tuple(DEFAULT_CHARACTERS) if self.glyphs == FONT else None
        if isinstance(characters, str) and self.glyphs == "omniglot":
            characters = [characters]
        elif isinstance(characters, str):
            characters = scene_sources.split_classes(self.glyphs, characters, self._frozen_options())
        names = list(characters)
        if not names:
            raise ValueError("characters is empty; give at least one class, or None for all")
        if any(not isinstance(name, str) for name in names):
            raise ValueError(f"characters must be strings, got {characters!r}")
        if self.glyphs == FONT and any(len(name) != 1 for name in names):
            raise ValueError(f"font characters must be single characters such as '0123456789', got {characters!r}")
        names = sorted(set(names))
        if self.glyphs == FONT:
            check_characters(names)
        return tuple(names)

    def _checked_glyph_options(self) -> dict[str, Any]:
        options = dict(self.glyph_options)
        if self.glyphs == FONT and options:
            raise ValueError(f"glyph_options {options} are for a glyph dataset; font glyphs take none")
        if any(not isinstance(name, str) or not name.isidentifier() for name in options):
            raise ValueError(f"glyph_options must map keyword names to values, got {self.glyph_options!r}")
        return {name: list(value) if isinstance(value, tuple) else value for name, value in sorted(options.items())}

    def _checked_example_range(self) -> tuple[float, float] | None:
        if self.glyph_example_range is not None and self.glyphs == FONT:
            raise ValueError(
                "glyph_example_range selects stored glyph images, but font glyphs are rendered fresh; "
                "leave it None with glyphs='font'"
            )
        return check_example_range(self.glyph_example_range, "glyph_example_range")


def _colours(name: str, value: Any) -> tuple[tuple[int, int, int], ...]:
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ValueError(f"{name} is empty; give at least one colour")
    if len(items) == 3 and all(isinstance(item, numbers.Integral) for item in items):
        raise ValueError(f"{name} must be a list of colours; for one RGB colour write [{tuple(items)}]")
    from PIL import ImageColor

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
        red, green, blue = (int(c) for c in rgb)
        result.append((red, green, blue))
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
