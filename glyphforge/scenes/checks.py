"""The checks of a scenes spec's fields (`glyphforge.scenes.spec.ScatteredGlyphs`), each a ValueError naming the
field and the rule, raised when the spec is made: before any work."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from glyphforge._checks import MAX_SIDE, check_example_range, check_int, check_shape
from glyphforge.scenes import sources as scene_sources
from glyphforge.scenes.shapes import SHAPE_NAMES
from glyphforge.scenes.sources import DRAWN, FONT, SHAPES

#: The fields that move a video's objects: they mean nothing to still scenes.
MOTION_FIELDS = ("patch_speed", "bounce_patches", "appearance_prob", "disappearance_prob")


def changed(spec: Any, names: Sequence[str]) -> list[str]:
    """The fields of ``names`` that ``spec`` does not leave at their defaults."""
    defaults = {spec_field.name: spec_field.default for spec_field in dataclasses.fields(spec)}
    return [name for name in names if getattr(spec, name) != defaults[name]]


def parts(spec: Any) -> None:
    """Check the layout, objects, task, motion and masks fields of ``spec``, and that they fit together (ValueError)."""
    if spec.draw_shape is not None:
        spec.draw_shape = check_shape(spec.draw_shape, "draw_shape", maximum=MAX_SIDE)
    spec.draw_offset = _pair("draw_offset", spec.draw_offset, 0)
    spec.spacing = _pair("spacing", spec.spacing, 0)
    if spec.grid_shape is not None:
        spec.grid_shape = check_shape(spec.grid_shape, "grid_shape", maximum=MAX_SIDE)
    if spec.random_offset_range is not None:
        spec.random_offset_range = _pair("random_offset_range", spec.random_offset_range, 1)
    check_int("n_distractors_per_image", spec.n_distractors_per_image, 0)
    spec.distractor_shape = check_shape(spec.distractor_shape, "distractor_shape", maximum=MAX_SIDE)
    if spec.reductions is not None:
        check_int("min_digits", spec.min_digits, 0)
        check_int("max_digits", spec.max_digits, max(1, spec.min_digits))
        if spec.largest_digit is not None:
            check_int("largest_digit", spec.largest_digit, 0)
        if changed(spec, ("min_glyphs", "max_glyphs")):
            raise ValueError("min_glyphs and max_glyphs count the glyphs of scenes without reductions; a scene "
                             "with reductions holds min_digits to max_digits digits: set those instead")
        task = spec.task
        assert task is not None
        task.check()
        if spec.glyphs in DRAWN and spec.characters is not None:  # known without data: checked now
            task.classes(spec.characters)
    elif changed(spec, ("min_digits", "max_digits", "largest_digit")):
        raise ValueError("min_digits, max_digits and largest_digit belong to a label task: give reductions "
                         "(e.g. 'sum' or 'A:sum,M:prod'), or use min_glyphs/max_glyphs")
    check_int("n_frames", spec.n_frames, 0)
    if spec.motion is not None:  # Motion checks its own fields when made
        spec.motion.check_frame(spec.image_shape)
        largest = spec.largest_glyph_shape()
        if spec.patch_speed > 0 and spec.bounce_patches and largest[0] >= spec.image_shape[0] and (
                largest[1] >= spec.image_shape[1]):
            raise ValueError(
                f"patch_speed {spec.patch_speed:g} asks objects of up to {largest[0]}x{largest[1]} to move, but they "
                f"fill the {spec.image_shape[0]}x{spec.image_shape[1]} frame, so they can neither bounce "
                "(bounce_patches=True) nor leave it: use smaller objects, bounce_patches=False, or patch_speed 0"
            )
    elif changed(spec, MOTION_FIELDS):
        raise ValueError("patch_speed, bounce_patches, appearance_prob and disappearance_prob move the objects of "
                         "videos: give n_frames >= 1 with them, or leave them at their defaults for still scenes")
    if not isinstance(spec.masks, bool):
        raise ValueError(f"masks must be True or False, got {spec.masks!r}")
    if spec.masks and spec.most_objects > 254:
        raise ValueError(f"masks hold slots 1..254 (uint8), and scenes may hold {spec.most_objects} objects: "
                         "ask for fewer objects, or no masks")
    spec.layout.check(spec.largest_glyph_shape(), spec.most_objects)


def characters(spec: Any) -> tuple[str, ...] | None:
    """Check ``spec.characters``; return the sorted class names (None: all of a dataset's)."""
    from glyphforge.pipelines.font_glyphs import DEFAULT_CHARACTERS, check_characters

    characters = spec.characters
    if characters is None:
        return {FONT: tuple(DEFAULT_CHARACTERS), SHAPES: SHAPE_NAMES}.get(spec.glyphs)
    if isinstance(characters, str) and spec.glyphs == SHAPES:
        characters = characters.replace(",", " ").split()
    elif isinstance(characters, str) and spec.glyphs == "omniglot":
        characters = [characters]
    elif isinstance(characters, str):
        characters = scene_sources.split_classes(spec.glyphs, characters, spec.frozen_options())
    names = list(characters)
    if not names:
        raise ValueError("characters is empty; give at least one class, or None for all")
    if any(not isinstance(name, str) for name in names):
        raise ValueError(f"characters must be strings, got {characters!r}")
    if spec.glyphs == FONT and any(len(name) != 1 for name in names):
        raise ValueError(f"font characters must be single characters such as '0123456789', got {characters!r}")
    names = sorted(set(names))
    if spec.glyphs == FONT:
        check_characters(names)
    if spec.glyphs == SHAPES:
        scene_sources.check_names(SHAPES, names, (), None)
    return tuple(names)

def glyph_options(spec: Any) -> dict[str, Any]:
    """Check ``spec.glyph_options``; return them sorted, lists for tuples."""
    options = dict(spec.glyph_options)
    if spec.glyphs in DRAWN and options:
        raise ValueError(f"glyph_options {options} are for a glyph dataset; {spec.glyphs} glyphs take none")
    if any(not isinstance(name, str) or not name.isidentifier() for name in options):
        raise ValueError(f"glyph_options must map keyword names to values, got {spec.glyph_options!r}")
    return {name: list(value) if isinstance(value, tuple) else value for name, value in sorted(options.items())}

def example_range(spec: Any) -> tuple[float, float] | None:
    """Check ``spec.glyph_example_range`` (none for drawn glyphs)."""
    if spec.glyph_example_range is not None and spec.glyphs in DRAWN:
        raise ValueError(
            f"glyph_example_range selects stored glyph images, but {spec.glyphs} glyphs are rendered fresh; "
            f"leave it None with glyphs={spec.glyphs!r}"
        )
    return check_example_range(spec.glyph_example_range, "glyph_example_range")


def _pair(name: str, value: Any, minimum: int) -> tuple[int, int]:
    """Check ``value`` is two integers ``>= minimum``; return it as a tuple."""
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be two integers (dy, dx), got {value!r}")
    return check_int(name, value[0], minimum), check_int(name, value[1], minimum)
