"""`ScatteredGlyphs`: scenes of glyphs scattered over backgrounds, with boxes and labels.

A build spec (see `glyphforge.builds.making.builder`): ``build(ScatteredGlyphs(10_000))``
makes the dataset in seeded shards through any session. Each scene is a background
(a random crop of a random texture, a random flat colour, or black) with
``min_glyphs`` to ``max_glyphs`` glyphs (from a registered glyph dataset such as
EMNIST or Omniglot, or characters rendered from Pillow's bundled font; see
`glyphforge.scenes.sources`) resized to ``glyph_shape``,
coloured, and alpha-composited (alpha = glyph intensity) at positions chosen by
rejection sampling so that no two glyph boxes share more than ``max_overlap`` of
either box's area.

The scene is made of parts that combine (each its own module): the layout
(`glyphforge.scenes.layout`: scattered, or a grid, in a draw window), the objects
(`glyphforge.scenes.objects`: glyphs, font characters or shapes, plus unannotated
distractors), the label task (`glyphforge.scenes.task`: a scene label reducing the
digits; `glyphforge.scenes.attributes`: from the objects' class, colour and size), the motion
(`glyphforge.scenes.motion`: videos), per-pixel instance ``masks`` and the crops scenes are cut
into (`glyphforge.scenes.crops`); `glyphforge.scenes.arrays` makes the arrays.
A part at its defaults changes neither `params` nor a byte of the scenes.

Arrays (docs/scenes.md): ``images`` uint8 ``(n, H, W, 3)``, ``n_glyphs`` int64 ``(n,)``, ``boxes``
float32 ``(n, G, 4)`` (``(top, left, bottom, right)``, bottom and right exclusive, the ink's tight
box) and ``labels`` int64 ``(n, G)`` (``G = max_glyphs``; -1 pads), and what the parts add. Class
names are never stored per glyph (strings would stop torch's default collate): ``labels`` index the
sorted class list ``ds.classes`` (``ds.metadata["class_names"]``); ``ds[i]`` is ``(image, targets)``.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_int, check_real, check_shape
from glyphforge.builds.making.spec import SpecError
from glyphforge.cache import Entry
from glyphforge.context import DataContext, as_context
from glyphforge.scenes import arrays, attributes, checks, objects
from glyphforge.scenes import sources as scene_sources
from glyphforge.scenes.attributes import AttributeTask
from glyphforge.scenes.crops import Crops
from glyphforge.scenes.crops import check as check_crops
from glyphforge.scenes.layout import PLACEMENT_ATTEMPTS, PLACEMENT_RESTARTS, Layout
from glyphforge.scenes.motion import Motion, trajectories
from glyphforge.scenes.sources import DRAWN, FONT, FrozenOptions, GlyphPool, Textures
from glyphforge.scenes.task import Task, parse_reductions

#: Bumped whenever the same spec would give different bytes; part of `ScatteredGlyphs.params`.
#: 2: glyph options replace emnist_split/omniglot_sets in the params; Omniglot's
#: glyph_example_range selects drawers by the rule every dataset shares (`example_bounds`).
#: 3: glyph positions are drawn from ``rng.random()`` (`composite.place`), not ``rng.integers``.
#: 4: no ``label_names`` array (the names are ``ds.classes``, which ``labels`` index).
ALGORITHM_VERSION = 4
#: The most scenes a shard may hold: a shard is made in one worker's memory (100,000 48x48 scenes: 0.7 GB).
MAX_SHARD_SIZE = 100_000

Colour = str | Sequence[int]
#: The fields of the parts besides scattered glyphs: each enters `ScatteredGlyphs.params` only when not at its default.
PART_FIELDS = (
    "draw_shape", "draw_offset", "grid_shape", "spacing", "random_offset_range", "n_distractors_per_image",
    "distractor_shape", "reductions", "min_digits", "max_digits", "largest_digit", "n_frames", "patch_speed",
    "bounce_patches", "appearance_prob", "disappearance_prob", "masks", "colour_labels", "attribute_task",
    "postprocessing", "tile_shape", "n_samples_per_image",
)


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
    draw_shape, draw_offset
        None (the whole image), or the ``(h, w)`` window at ``(top, left)`` inside the
        image that objects are placed in (the first frame's, for videos).
    grid_shape, spacing, random_offset_range
        None (scattered, by ``max_overlap``), or ``(rows, cols)``: each object is centred
        in a distinct random cell of the largest object's size plus ``spacing``
        ``(dy, dx)``, the grid shifted per scene by an offset in ``[0, random_offset_range)``.
    n_distractors_per_image, distractor_shape
        Unannotated clutter: random ``distractor_shape`` crops of further objects, drawn
        under the objects (in place in every frame of a video), in no box, label or mask.
    reductions, min_digits, max_digits, largest_digit
        A scene label (`glyphforge.scenes.task`): ``"sum"`` (or prod, max, min, count), or
        operator classes mapped to reductions (``"A:sum,M:prod"``); scenes then hold
        ``min_digits`` to ``max_digits`` digits (and the operator, in slot 0), not
        ``min_glyphs`` to ``max_glyphs`` glyphs; the label is capped at ``largest_digit``.
    n_frames, patch_speed, bounce_patches, appearance_prob, disappearance_prob
        0 for still scenes; else videos of ``n_frames`` frames whose objects move
        (`glyphforge.scenes.motion.Motion`), with per-frame ``boxes``, ``labels``, ``ids``
        and ``visible``.
    masks
        Add the ``masks`` array: 0 for background, ``j + 1`` where the object in slot
        ``j`` shows (later slots over earlier ones; distractors are background).
    colour_labels
        Add the ``colours`` array (like ``labels``): each object's index into ``colours``.
    attribute_task
        A scene label from the objects' class, colour and size (`glyphforge.scenes.attributes`):
        ``"set"`` (do some three form a set?) or ``"above:blue x,red circle"`` (is the first above
        the second?); font or shapes glyphs.
    postprocessing, tile_shape, n_samples_per_image
        ``""`` (whole scenes), or cut each scene into ``tile_shape`` crops, each an example
        (`glyphforge.scenes.crops`): ``"tile"`` (a grid), ``"tile_pad"`` (a grid over the scene
        padded with black) or ``"random"`` (``n_samples_per_image`` random crops).
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
    draw_shape: tuple[int, int] | None = None
    draw_offset: tuple[int, int] = (0, 0)
    grid_shape: tuple[int, int] | None = None
    spacing: tuple[int, int] = (0, 0)
    random_offset_range: tuple[int, int] | None = None
    n_distractors_per_image: int = 0
    distractor_shape: tuple[int, int] = (3, 3)
    reductions: str | None = None
    min_digits: int = 1
    max_digits: int = 3
    largest_digit: int | None = None
    n_frames: int = 0
    patch_speed: float = 2.0
    bounce_patches: bool = True
    appearance_prob: float = 1.0
    disappearance_prob: float = 0.0
    masks: bool = False
    colour_labels: bool = False
    attribute_task: str | None = None
    postprocessing: str = ""
    tile_shape: tuple[int, int] | None = None
    n_samples_per_image: int = 1
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
        self.glyph_options = checks.glyph_options(self)
        self.characters = checks.characters(self)
        if self.glyph_shape_jitter is not None:
            self.glyph_shape_jitter = check_real("glyph_shape_jitter", self.glyph_shape_jitter, 0, 1,
                                                 high_inclusive=False)
        largest = self.largest_glyph_shape()
        if largest[0] > self.image_shape[0] or largest[1] > self.image_shape[1]:
            raise ValueError(
                f"glyphs of up to {largest[0]}x{largest[1]} (glyph_shape {self.glyph_shape}, jitter "
                f"{self.glyph_shape_jitter}) do not fit in image_shape {self.image_shape}; use a smaller "
                "glyph_shape or glyph_shape_jitter, or a larger image_shape"
            )
        check_int("min_glyphs", self.min_glyphs, 0)
        check_int("max_glyphs", self.max_glyphs, max(1, self.min_glyphs))
        self.max_overlap = check_real("max_overlap (a fraction of a box's area)", self.max_overlap, 0, 1)
        self.backgrounds = objects.background_names(self.backgrounds)
        if self.background_colours is not None:
            self.background_colours = objects.colours("background_colours", self.background_colours)
        self.colours = objects.colours("colours", self.colours)
        self.glyph_example_range = checks.example_range(self)
        checks.parts(self)

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
        params.update(
            (spec_field.name, getattr(self, spec_field.name)) for spec_field in dataclasses.fields(self)
            if spec_field.name in PART_FIELDS and getattr(self, spec_field.name) != spec_field.default
        )
        if self.motion is not None:
            params.update(self.motion.params())  # its algorithm's version too
        if self.glyphs == FONT:
            import PIL

            params["pillow"] = PIL.__version__  # the font and its rasteriser ship with Pillow
        return params

    def own_sources(self, context: DataContext | PathLike) -> dict[str, dict[str, str]]:
        """The own copies (unverified) the glyphs and textures would be read from (`scene_sources.own_sources`):
        `glyphforge.build` keys the entry by them besides `params` (none: upstream's, the key of `params`)."""
        context = as_context(context)
        with self._spec_errors():  # an unknown name is the spec's fault, found here before prepare
            scene_sources.check_names(self.glyphs, self.characters, self.frozen_options(), self.backgrounds)
            return scene_sources.own_sources(self.glyphs, self.frozen_options(), self.backgrounds, context)

    def prepare(self, context: DataContext | PathLike) -> list[Entry]:
        """Fetch and convert what the shards read, check the classes and backgrounds against it; return its entries.

        `glyphforge.build` calls it on the driver before fanning out, with the build's
        `~glyphforge.context.DataContext` (its mirrors, ``offline`` and ``verify`` reach the
        glyph dataset's and the backgrounds' prepare); a data dir path is accepted too (the
        environment's fetch settings). Shard workers then only read the cache, and an
        unknown class or background name fails here (a `SpecError`), before any shard runs.
        """
        context = as_context(context)
        data_dir = context.data_dir
        with self._spec_errors():
            scene_sources.check_names(self.glyphs, self.characters, self.frozen_options(), self.backgrounds)
            entries = scene_sources.prepare_sources(
                self.glyphs, self.frozen_options(), self._pool_shape(), self.backgrounds, context
            )
            self.class_names(data_dir)  # loads the glyphs here once: unknown classes are named now
            self.textures(data_dir)
            # One scene made here compiles the exact kernels the shards run (or loads them from numba's
            # on-disk cache): a session's workers then load them instead of each compiling them. It also
            # finds constraints no scene can meet (glyphs that cannot be placed) before any shard runs.
            self.make_shard(0, np.random.default_rng(0), 1, data_dir=data_dir)
        return entries

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
        """Make ``n`` scenes (or crops of scenes) drawing every random choice from ``rng`` (module docstring).

        ``data_dir`` is where the prepared glyphs and textures are read from (the
        build's data dir; None: the default data dir).
        """
        crops = self.crops
        if crops is None:
            return self._scenes(index, rng, n, data_dir)
        return crops.cut(self._scenes(index, rng, crops.scenes_for(n), data_dir), rng, n)

    def _scenes(self, index: int, rng: np.random.Generator, n: int, data_dir: PathLike | None
                ) -> dict[str, np.ndarray]:
        from glyphforge.pipelines import composite  # numba: imported where scenes are made, not specified

        pool = self.glyph_pool(data_dir)
        chosen = attributes.choose(self, rng, n, pool.class_names)
        counts, labels, scene_label = chosen.counts, chosen.labels, chosen.scene_label
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        things = self._object_images(pool, labels, rng, chosen.scales)
        ink = np.empty((len(labels), 4), np.int64)  # the kernels' arrays are made here: numba compiles no allocation
        composite.ink_boxes(things.images, things.heights, things.widths, ink)
        positions, boxes, failed = self.layout.place(rng, starts, counts, ink, things.sizes(),
                                                     self.largest_glyph_shape())
        if failed >= 0:
            raise ValueError(
                f"could not place {counts[failed]} glyphs in scene {failed} of shard {index}: after "
                f"{PLACEMENT_ATTEMPTS} tries per glyph and {PLACEMENT_RESTARTS} fresh starts, some glyph "
                f"boxes still shared more than max_overlap={self.max_overlap} of their area in a "
                f"{self.layout.draw_shape[0]}x{self.layout.draw_shape[1]} image. Lower min_glyphs/max_glyphs or "
                "glyph_shape, or raise image_shape or max_overlap"
            )
        attribute_task = self.attributes
        if attribute_task is not None and scene_label is None:  # "above": from where the objects went
            scene_label = attribute_task.label_from_boxes(boxes, starts)
        colour_index = chosen.colour_index
        if colour_index is None:  # drawn here, as before colours could be labels: the same bytes
            colour_index = rng.integers(0, len(self.colours), len(labels))
        colours = np.array(self.colours, np.uint8)[colour_index]
        textures = self.textures(data_dir)
        background, crop, flat_colours = objects.background_choices(rng, n, textures, self.background_colours,
                                                                         self.image_shape)
        scene = arrays.Objects(counts, starts, labels, ink, positions[:, None], np.ones((len(labels), 1), bool))
        if self.motion is not None:
            sizes = ink[:, 2:] - ink[:, :2]
            moved, shown = trajectories(rng, self.motion, sizes, boxes[:, :2], self.image_shape)
            scene = dataclasses.replace(scene, positions=moved - ink[:, None, :2], shown=shown)
        drawn = arrays.Drawn(things.images, colours, np.arange(len(labels)) - starts.repeat(counts) + 1)
        annotated = scene
        if self.n_distractors_per_image:
            scene, drawn = self._with_distractors(rng, pool, scene, drawn)
        frames = max(self.n_frames, 1)
        images = np.empty((n, *([self.n_frames] if self.n_frames else []), *self.image_shape, 3), np.uint8)
        masks = np.zeros((n * frames if self.masks else 0, *self.image_shape), np.uint8)
        composite.composite(
            images.reshape(n * frames, self.image_shape[0], -1), drawn.images, scene.starts, scene.counts, scene.ink,
            scene.positions, scene.shown.astype(np.uint8), drawn.colours, drawn.mask_values.astype(np.uint8), masks,
            background, crop, flat_colours, textures.flat, textures.offsets, textures.widths,
        )
        made: dict[str, np.ndarray] = {"images": images, "n_glyphs": counts.astype(np.int64)}
        if self.n_frames:
            made.update(arrays.video(annotated, self.most_objects, self.image_shape))
        else:
            made.update(arrays.still(counts, starts, labels, boxes, self.most_objects))
        if self.colour_labels:
            made["colours"] = arrays.per_slot(counts, starts, colour_index, self.most_objects, self.n_frames)
        if self.masks:
            made["masks"] = masks.reshape(images.shape[:-1])
        if scene_label is not None:
            made["scene_label"] = scene_label
        return made

    def metadata(self, *, data_dir: PathLike | None = None) -> dict[str, Any]:
        """What a built dataset keeps beside its arrays: ``class_names``, which ``labels`` index (``ds.classes``),
        with ``colour_labels`` the RGB ``colours`` the ``colours`` array indexes, and, for videos, masks or a task,
        ``scene``: ``{"n_frames", "masks", "task"}`` (task: the reductions by operator class, ``""`` for a single
        one, the ``attribute_task``, or None)."""
        found: dict[str, Any] = {"class_names": list(self.class_names(data_dir))}
        if self.colour_labels:
            found["colours"] = [list(rgb) for rgb in self.colours]
        if self.n_frames or self.masks or self.task is not None or self.attribute_task is not None:
            task = self.attribute_task if self.task is None else dict(self.task.reductions)
            found["scene"] = {"n_frames": self.n_frames, "masks": self.masks, "task": task}
        return found

    # -- parts --------------------------------------------------------------------
    @property
    def layout(self) -> Layout:
        """Where the objects go (`glyphforge.scenes.layout`)."""
        return Layout(self.image_shape, self.draw_shape or self.image_shape, self.draw_offset, self.max_overlap,
                      self.grid_shape, self.spacing, self.random_offset_range)

    @property
    def task(self) -> Task | None:
        """The scene-label task (`glyphforge.scenes.task`), or None."""
        if self.reductions is None:
            return None
        return Task(parse_reductions(self.reductions), self.min_digits, self.max_digits, self.largest_digit)

    @property
    def motion(self) -> Motion | None:
        """The motion of a video (`glyphforge.scenes.motion.Motion`); None for still scenes."""
        if not self.n_frames:
            return None
        return Motion(self.n_frames, self.patch_speed, self.bounce_patches, self.appearance_prob,
                      self.disappearance_prob)

    @property
    def most_objects(self) -> int:
        """``G``: the most annotated objects a scene holds (the slots of ``boxes`` and ``labels``)."""
        return self.max_glyphs if self.task is None else self.task.most_objects

    @property
    def crops(self) -> Crops | None:
        """How scenes are cut into crops (`glyphforge.scenes.crops`), or None: whole scenes."""
        return check_crops(self.postprocessing, self.tile_shape, self.n_samples_per_image, self.image_shape)

    @property
    def attributes(self) -> AttributeTask | None:
        """The attribute task (`glyphforge.scenes.attributes`), or None."""
        if self.attribute_task is None:
            return None
        names = tuple(self.characters) if self.glyphs in DRAWN and self.characters is not None else None
        colours = tuple((int(rgb[0]), int(rgb[1]), int(rgb[2])) for rgb in self.colours)  # RGB once checked
        return attributes.parse(self.attribute_task, colours, names, (self.min_glyphs, self.max_glyphs))

    def _object_images(self, pool: GlyphPool, labels: np.ndarray, rng: np.random.Generator,
                       scales: np.ndarray | None = None) -> objects.ObjectImages:
        return objects.object_images(self.glyphs, pool, labels, rng, self.glyph_shape, self.glyph_shape_jitter,
                                     self.largest_glyph_shape(), scales)

    def _with_distractors(
        self, rng: np.random.Generator, pool: GlyphPool, scene: arrays.Objects, drawn: arrays.Drawn,
    ) -> tuple[arrays.Objects, arrays.Drawn]:
        """Add ``n_distractors_per_image`` distractors to each scene, first in its drawing order."""
        n, per_scene = len(scene.counts), self.n_distractors_per_image
        sources = self._object_images(pool, rng.integers(0, len(pool.class_names), n * per_scene), rng)
        crops = objects.distractor_crops(sources, self.distractor_shape, rng)
        window = np.array(self.layout.draw_shape, np.int64)
        corners = (rng.random((n * per_scene, 2)) * (window - crops.sizes() + 1)).astype(np.int64) + self.draw_offset
        colours = np.array(self.colours, np.uint8)[rng.integers(0, len(self.colours), n * per_scene)]
        ink = np.zeros((n * per_scene, 4), np.int64)
        ink[:, 2:] = crops.sizes()
        extra = arrays.Objects(
            np.full(n, per_scene, np.int64), np.arange(n, dtype=np.int64) * per_scene, np.full(n * per_scene, -1),
            ink, np.repeat(corners[:, None], scene.positions.shape[1], 1),
            np.ones((n * per_scene, scene.positions.shape[1]), bool),
        )
        extra_drawn = arrays.Drawn(crops.images, colours, np.zeros(n * per_scene, np.int64))
        return arrays.merge(extra, extra_drawn, scene, drawn)

    # -- data -------------------------------------------------------------------
    def class_names(self, data_dir: PathLike | None = None) -> tuple[str, ...]:
        """The sorted class names that ``labels`` index (reads the glyph data, except for font)."""
        return self.glyph_pool(data_dir).class_names

    def glyph_pool(self, data_dir: PathLike | None = None) -> GlyphPool:
        """The glyph images of this spec, read from the cache of ``data_dir`` once per process."""
        return scene_sources.glyph_pool(
            self.glyphs, self.characters, self.frozen_options(), self.glyph_example_range, self._pool_shape(),
            as_context(data_dir),
        )

    def textures(self, data_dir: PathLike | None = None) -> Textures:
        """The background textures of this spec (an empty set when there are none), read once per process."""
        return scene_sources.textures(self.backgrounds, self.image_shape, as_context(data_dir))

    def _pool_shape(self) -> tuple[int, int] | None:
        # Without jitter every glyph has glyph_shape: read the cached box-resized variant
        # (the same pixels as resizing each glyph, in a fraction of the memory).
        return self.glyph_shape if self.glyph_shape_jitter is None else None

    def frozen_options(self) -> FrozenOptions:
        """``glyph_options`` as a hashable, canonical value."""
        return tuple(
            (name, tuple(value) if isinstance(value, list) else value)
            for name, value in sorted(self.glyph_options.items())
        )

    # -- per-shard steps ----------------------------------------------------------
    def largest_glyph_shape(self) -> tuple[int, int]:
        """The largest ``(h, w)`` an object can have (``glyph_shape`` grown by ``glyph_shape_jitter``)."""
        grow = 1 + (self.glyph_shape_jitter or 0.0)
        return int(np.rint(self.glyph_shape[0] * grow)), int(np.rint(self.glyph_shape[1] * grow))
