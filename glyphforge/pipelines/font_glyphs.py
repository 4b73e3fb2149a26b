"""Glyphs rendered from the font Pillow bundles, so scenes need no data and no network.

`render_font_glyphs` draws characters with ``PIL.ImageFont.load_default(size)``
(the TrueType font shipped inside Pillow) at a seeded random size, stroke width
and rotation, white on black, each centred on a square canvas like an EMNIST
image, ready to be resized to a scene's glyph shape.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from glyphforge.textfmt import count

#: Default characters: the 62 classes of EMNIST byclass (digits, upper, lower case).
DEFAULT_CHARACTERS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

#: Font size, as a fraction of the canvas side, is drawn uniformly from this range.
SIZE_RANGE = (0.6, 1.0)
#: Rotation in degrees (counter-clockwise) is drawn uniformly from this range.
ANGLE_RANGE = (-20.0, 20.0)
#: The largest stroke width, as a fraction of the canvas side (0 means no stroke).
MAX_STROKE = 1 / 16


@functools.lru_cache(maxsize=64)
def _font(size: int) -> ImageFont.FreeTypeFont:
    font = ImageFont.load_default(size)
    if not isinstance(font, ImageFont.FreeTypeFont):
        raise RuntimeError(
            "Pillow's bundled font cannot be drawn at a chosen size because this Pillow was built "
            "without FreeType; install a Pillow wheel from PyPI (pip install --force-reinstall pillow) "
            "or use EMNIST/Omniglot glyphs instead of font glyphs"
        )
    return font


def render_glyph(character: str, *, size: int, stroke: int = 0, angle: float = 0.0) -> np.ndarray:
    """Render one character, white on black, cropped tightly to its ink.

    Parameters
    ----------
    character
        One character.
    size
        Font size in pixels.
    stroke
        Extra stroke width in pixels (0 for the plain font).
    angle
        Counter-clockwise rotation in degrees (bilinear).

    Returns
    -------
    numpy.ndarray
        uint8 ``(h, w)``; ``(0, 0)`` when the character has no ink (e.g. a space).
    """
    font = _font(size)
    left, top, right, bottom = font.getbbox(character, stroke_width=stroke)
    image = Image.new("L", (int(right - left) + 2, int(bottom - top) + 2), 0)
    ImageDraw.Draw(image).text(
        (1 - left, 1 - top), character, fill=255, font=font, stroke_width=stroke, stroke_fill=255
    )
    if angle:
        image = image.rotate(angle, resample=Image.Resampling.BILINEAR, expand=True)
    box = image.getbbox()
    if box is None:
        return np.zeros((0, 0), np.uint8)
    return np.asarray(image.crop(box))


#: A code point no font has (plane 16, private use): the font draws its missing-glyph box for it.
_MISSING_PROBE = "\U0010fffd"
#: Font size at which characters are checked.
_CHECK_SIZE = 32


@functools.lru_cache(maxsize=1)
def _missing_box() -> np.ndarray:
    return render_glyph(_MISSING_PROBE, size=_CHECK_SIZE)


def lacks(character: str) -> bool:
    """Return True if the bundled font has no glyph for ``character`` (it draws its missing-glyph box instead)."""
    drawn, box = render_glyph(character, size=_CHECK_SIZE), _missing_box()
    return drawn.shape == box.shape and bool((drawn == box).all())


def check_characters(characters: Sequence[str]) -> None:
    """Raise ValueError unless every entry is one character the font has and draws with ink.

    Characters the font lacks (accented and non-Latin letters, emoji) would all be drawn
    as the same missing-glyph box under different labels: they are named and refused.
    """
    for character in characters:
        if not isinstance(character, str) or len(character) != 1:
            raise ValueError(
                f"font glyph classes must be single characters, got {character!r}; "
                "pass characters as a string such as '0123456789'"
            )
    missing = [character for character in characters if lacks(character)]
    if missing:
        raise ValueError(
            f"Pillow's bundled font has no glyph for {count(len(missing), 'character', 'characters')} "
            f"{''.join(missing)!r} ({', '.join(f'U+{ord(c):04X}' for c in missing)}): each would be drawn as the "
            "same missing-glyph box. Use characters the font has (digits, ASCII letters and punctuation), or "
            "EMNIST/Omniglot glyphs"
        )
    blank = [character for character in characters if render_glyph(character, size=_CHECK_SIZE).size == 0]
    if blank:
        raise ValueError(
            f"character {blank[0]!r} draws no ink in Pillow's bundled font, so it cannot be "
            "a glyph; remove it from characters"
        )


def render_font_glyphs(
    characters: Sequence[str], labels: np.ndarray, rng: np.random.Generator, canvas: int
) -> np.ndarray:
    """Render ``characters[labels[i]]`` for every ``i`` with seeded random style.

    Each glyph gets a font size (`SIZE_RANGE` of ``canvas``), a stroke width
    (0 to `MAX_STROKE` of ``canvas``) and a rotation (`ANGLE_RANGE`) drawn from
    ``rng``, is cropped to its ink, shrunk (Pillow BOX, aspect kept) if it is
    larger than the canvas, and centred on the canvas.

    Parameters
    ----------
    characters
        The class names, single characters.
    labels
        int ``(M,)`` indices into ``characters``.
    rng
        The source of every random choice.
    canvas
        Side of the square output images in pixels.

    Returns
    -------
    numpy.ndarray
        uint8 ``(M, canvas, canvas)``, white strokes on black.
    """
    m = len(labels)
    sizes = rng.integers(round(SIZE_RANGE[0] * canvas), round(SIZE_RANGE[1] * canvas) + 1, m)
    strokes = rng.integers(0, int(MAX_STROKE * canvas) + 1, m)
    angles = rng.uniform(*ANGLE_RANGE, m)
    out = np.zeros((m, canvas, canvas), np.uint8)
    for i in range(m):
        ink = render_glyph(characters[labels[i]], size=int(sizes[i]), stroke=int(strokes[i]), angle=float(angles[i]))
        if max(ink.shape) > canvas:
            image = Image.fromarray(ink)
            image.thumbnail((canvas, canvas), Image.Resampling.BOX)
            ink = np.asarray(image)
        h, w = ink.shape
        top, left = (canvas - h) // 2, (canvas - w) // 2
        out[i, top : top + h, left : left + w] = ink
    return out


def shrink_rendered(glyphs: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Resize rendered glyphs ``(N, S, S)`` to ``shape`` with Pillow's BOX filter, one by one.

    The same pixels as ``glyphforge.resize(glyphs, shape, method="box")`` (which equals
    Pillow >= 13; the rendering itself depends on the Pillow version anyway), without
    compiling its numba kernel: font glyphs are drawn one at a time by Pillow anyway, and
    the font scenes new users build first start as fast as EMNIST ones.
    """
    height, width = shape
    out = np.empty((len(glyphs), height, width), np.uint8)
    for k, glyph in enumerate(glyphs):
        out[k] = np.asarray(Image.fromarray(glyph).resize((width, height), Image.Resampling.BOX))
    return out
