"""`preview`: a PNG grid of examples, with boxes and labels drawn, to look at data before training."""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from glyphforge._checks import PathLike, check_int
from glyphforge._files import atomic_path, writing

#: Pixels between cells and around the grid.
GAP = 4
#: Images are enlarged by an integer factor (nearest) up to this side, or shrunk (box) down to it.
TARGET_SIDE = 128
#: Height of the caption row under each image when examples have one label each.
CAPTION_HEIGHT = 14
#: Box outline colours, by glyph slot.
BOX_COLOURS = ((255, 64, 64), (64, 224, 64), (64, 160, 255), (255, 200, 0), (224, 64, 224), (0, 224, 224))
BACKDROP = (32, 32, 32)
#: Font sizes a label may be drawn at, largest first: the largest at which it fits its tile.
FONT_SIZES = (11, 10, 9, 8)
#: Where a label too wide for its tile may be wrapped: after these characters (Omniglot's "Alphabet_(script),12").
BREAK_AFTER = re.compile(r"(?<=[,_\s/)-])")

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def preview(
    data: Any,
    n: int = 16,
    path: PathLike = "scenes.png",
    *,
    labels: np.ndarray | Sequence[Any] | None = None,
    class_names: Sequence[str] | None = None,
    columns: int | None = None,
    scale: float | None = None,
) -> Path:
    """Write a PNG grid of the first ``n`` examples of ``data``, with boxes and labels.

    Parameters
    ----------
    data
        A built scenes dataset (`glyphforge.build` of `glyphforge.ScatteredGlyphs`) or
        a mapping with its arrays (``images``, ``boxes`` and ``labels``): each glyph's box
        is drawn with its class name (``class_names[label]``; inside its tile: drawn smaller
        or wrapped when too wide, see `FONT_SIZES`). Or plain images:
        a uint8 array ``(N, H, W)`` / ``(N, H, W, 3)``, or a list of such images of
        any sizes (e.g. `glyphforge.load_backgrounds`).
    n
        How many examples (the first ``n``; fewer if there are fewer).
    path
        The PNG file to write (its folder is created when missing; written atomically).
    labels
        For plain images: one label per image, written under it (e.g. the ``y`` of
        `glyphforge.load_emnist`); ints index ``class_names`` when given.
    class_names
        Names for integer labels (default: a built dataset's ``classes``; without names a label is
        written as its number).
    columns
        Grid columns (default: about a square grid).
    scale
        Zoom factor for every image (default: the integer factor bringing the
        largest image side up to 128 pixels, or the fraction shrinking it to 128).

    Returns
    -------
    pathlib.Path
        ``path``. The PNG is ``columns * cell_w + (columns + 1) * 4`` pixels wide and
        ``rows * (cell_h + caption) + (rows + 1) * 4`` high, where ``cell_h x cell_w``
        is the largest image's zoomed size and ``caption`` 14 with labels, else 0.
    """
    n = check_int("n (how many examples to show)", n, 1)
    if class_names is None:
        class_names = getattr(data, "classes", None)
    images, boxes, glyph_names = _examples(data, n, class_names)
    captions = None if labels is None else [_name(label, class_names) for label in list(labels)[: len(images)]]
    if captions is not None and len(captions) != len(images):
        raise ValueError(f"labels has {len(captions)} entries for {len(images)} images; give one label per image")
    largest = max(max(image.shape[:2]) for image in images)
    if scale is None:
        scale = TARGET_SIDE // largest if largest <= TARGET_SIDE else TARGET_SIDE / largest
    if not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    cell_h = math.ceil(max(image.shape[0] for image in images) * scale)
    cell_w = math.ceil(max(image.shape[1] for image in images) * scale)
    caption_h = CAPTION_HEIGHT if captions is not None else 0
    columns = math.ceil(math.sqrt(len(images))) if columns is None else check_int("columns", columns, 1)
    rows = math.ceil(len(images) / columns)
    sheet = Image.new(
        "RGB", (columns * cell_w + (columns + 1) * GAP, rows * (cell_h + caption_h) + (rows + 1) * GAP), BACKDROP
    )
    draw = ImageDraw.Draw(sheet)
    for i, image in enumerate(images):
        left = GAP + (i % columns) * (cell_w + GAP)
        top = GAP + (i // columns) * (cell_h + caption_h + GAP)
        sheet.paste(_zoomed(image, scale), (left, top))
        if boxes is not None:
            _draw_boxes(draw, boxes[i], glyph_names[i], scale, (left, top, cell_w, cell_h))
        if captions is not None:
            _draw_label(draw, captions[i], (255, 255, 255), (left, top + cell_h, cell_w, caption_h), (0, 0, 0, 0))
    return _save(sheet, Path(path))


def _save(sheet: Image.Image, path: Path) -> Path:
    """Write ``sheet`` as a PNG at ``path``, creating its directory; atomically, with storage errors named."""
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the preview to {path}: it is a directory. Give a file name, such as "
                                f"{path / 'preview.png'}")
    with writing(path, "Give a PNG path on a disk with room that you can write to"):
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary:
            sheet.save(temporary, format="PNG")
    return path


def _examples(data: Any, n: int, class_names: Sequence[str] | None) -> tuple[list[np.ndarray], Any, Any]:
    """Return the first ``n`` images and, for scenes, their boxes and glyph names."""
    arrays = data.arrays if hasattr(data, "arrays") else data
    if isinstance(arrays, Mapping):
        if "images" not in arrays:
            raise ValueError(f"preview needs an 'images' array; the data has {', '.join(map(str, arrays))}")
        images = np.asarray(arrays["images"][:n])
        boxes = arrays.get("boxes")
        if boxes is None:
            return _checked(images), None, None
        names: list[list[str]]
        if "labels" in arrays:
            names = [[_name(label, class_names) if label >= 0 else "" for label in row] for row in arrays["labels"][:n]]
        else:
            names = [[""] * boxes.shape[1]] * len(images)
        return _checked(images), np.asarray(boxes[:n]), names
    if isinstance(data, np.ndarray):
        if data.ndim not in (3, 4):
            raise ValueError(
                f"preview takes a batch of images (N, H, W) or (N, H, W, 3), got an array of shape {data.shape}; "
                "for one image pass image[None]"
            )
        return _checked(data[:n]), None, None
    if isinstance(data, Sequence) and not isinstance(data, str) and len(data) > 0:
        return _checked([np.asarray(image) for image in data[:n]]), None, None
    raise TypeError(
        f"preview takes a built dataset, a dict of arrays, an image array or a list of images; got "
        f"{type(data).__name__}"
    )


def _checked(images: Any) -> list[np.ndarray]:
    checked = []
    for image in images:
        if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] != 3):
            raise ValueError(
                f"preview draws uint8 grey (H, W) or RGB (H, W, 3) images, got {image.dtype} {image.shape}; "
                "convert with (x * 255).astype(numpy.uint8) or pick the RGB channels"
            )
        checked.append(image)
    if not checked:
        raise ValueError("there are no images to preview")
    return checked


def _name(label: Any, class_names: Sequence[str] | None) -> str:
    if class_names is not None and isinstance(label, (int, np.integer)):
        return str(class_names[int(label)])
    return str(label)


def _zoomed(image: np.ndarray, scale: float) -> Image.Image:
    picture = Image.fromarray(image).convert("RGB")
    size = (math.ceil(image.shape[1] * scale), math.ceil(image.shape[0] * scale))
    if size == picture.size:
        return picture
    resample = Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.BOX
    return picture.resize(size, resample)


def _draw_boxes(
    draw: ImageDraw.ImageDraw, boxes: np.ndarray, names: Sequence[str], scale: float,
    tile: tuple[int, int, int, int],
) -> None:
    """Outline each real box (padding rows are -1) of the ``(left, top, width, height)`` tile; write its class name."""
    for slot, (box, name) in enumerate(zip(boxes, names, strict=True)):
        if box[0] < 0:
            continue
        top, left, bottom, right = (float(value) * scale for value in box)
        colour = BOX_COLOURS[slot % len(BOX_COLOURS)]
        draw.rectangle((tile[0] + left, tile[1] + top, tile[0] + right - 1, tile[1] + bottom - 1), outline=colour)
        if name:
            _draw_label(draw, str(name), colour, tile, (top, left, bottom, right))


def _draw_label(
    draw: ImageDraw.ImageDraw, text: str, colour: tuple[int, int, int], tile: tuple[int, int, int, int],
    box: tuple[float, float, float, float],
) -> None:
    """Write ``text`` by ``box`` (top, left, bottom, right in the tile), inside the ``(left, top, width, height)`` tile.

    Above the box when there is room, else below it, else as low as the tile allows; moved left
    where it would cross the tile's right edge. A label too large for its tile is drawn smaller
    and wrapped (`_fitted`); one that fits in no way (a tile under 10 pixels high) is not drawn.
    """
    fitted = _fitted(draw, text, tile[2], tile[3])
    if fitted is None:
        return
    lines, font, (x0, y0, x1, y1) = fitted
    width, height = x1 - x0, y1 - y0
    top, left, bottom, _ = box
    y = top - height if top >= height else bottom if bottom + height <= tile[3] else tile[3] - height
    x = min(left, tile[2] - width)
    draw.text((tile[0] + round(x) - x0, tile[1] + round(y) - y0), lines, fill=colour, font=font)


def _fitted(draw: ImageDraw.ImageDraw, text: str, width: int, height: int
            ) -> tuple[str, Font, tuple[int, int, int, int]] | None:
    """How to draw ``text`` within ``width`` x ``height`` pixels: ``(its lines, font, text box at (0, 0))``.

    On one line at the largest of `FONT_SIZES` it fits, else wrapped (`BREAK_AFTER`) at the largest;
    at the smallest, the lines that fit, the last cut with "...". None when not even that fits.
    Shrinking keeps a name whole and readable up to the point where it would not be, and wrapping
    keeps it beside its glyph, where a legend would send the eye elsewhere.
    """
    for wrap in (False, True):
        for size in FONT_SIZES:
            font = _font(size)
            lines = "\n".join(_wrapped(draw, text, font, width)) if wrap else text
            bbox = _bbox(draw, lines, font)
            if bbox[2] - bbox[0] <= width and bbox[3] - bbox[1] <= height:
                return lines, font, bbox
    kept: list[str] = []
    for line in _wrapped(draw, text, font, width):  # the smallest font: as many lines as fit, then "..."
        bbox = _bbox(draw, "\n".join([*kept, line + "..."]), font)
        if bbox[3] - bbox[1] > height:
            break
        kept.append(line)
    while kept:
        lines = "\n".join(kept[:-1] + [kept[-1] + "..."])
        bbox = _bbox(draw, lines, font)
        if bbox[2] - bbox[0] <= width:
            return lines, font, bbox
        kept[-1] = kept[-1][:-1]
        if not kept[-1]:
            kept.pop()
    return None


def _wrapped(draw: ImageDraw.ImageDraw, text: str, font: Font, width: int) -> list[str]:
    """``text`` in lines no wider than ``width``: broken after `BREAK_AFTER`, or within a part too wide alone."""
    lines = [""]
    for part in BREAK_AFTER.split(text):
        for char in part if draw.textlength(part, font=font) > width else [part]:
            if lines[-1] and draw.textlength(lines[-1] + char, font=font) > width:
                lines.append("")
            lines[-1] += char
    return lines


def _bbox(draw: ImageDraw.ImageDraw, lines: str, font: Font) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = draw.multiline_textbbox((0, 0), lines, font=font)
    return int(x0), int(y0), int(x1), int(y1)


@functools.cache
def _font(size: int) -> Font:
    return ImageFont.load_default(size)
