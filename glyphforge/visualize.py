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
#: Milliseconds each frame of an animated preview shows.
FRAME_MS = 200
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
    animate: bool = False,
) -> Path:
    """Write a PNG grid of the first ``n`` examples of ``data``, with boxes and labels; a video's frames in a row.

    Parameters
    ----------
    data
        A built scenes dataset (`glyphforge.build` of `glyphforge.ScatteredGlyphs`) or
        a mapping with its arrays (``images``, ``boxes`` and ``labels``): each glyph's box
        is drawn with its class name (``class_names[label]``; inside its tile: drawn smaller
        or wrapped when too wide, see `FONT_SIZES`). Videos (``images`` ``(N, T, H, W, 3)``,
        ``boxes`` ``(N, T, G, 4)``, ``labels`` ``(N, T, G)``) show each frame's boxes. Or plain images:
        a uint8 array ``(N, H, W)`` / ``(N, H, W, 3)`` (or videos ``(N, T, H, W, 3)``), or a list of
        such images of any sizes (e.g. `glyphforge.load_backgrounds`).
    n
        How many examples (the first ``n``; fewer if there are fewer).
    path
        The file to write (its folder is created when missing; written atomically): a PNG, or
        with ``animate`` an animated PNG, or an animated GIF when it ends in ``.gif``.
    labels
        For plain images: one label per image, written under it (e.g. the ``y`` of
        `glyphforge.load_emnist`; under each frame of a video); ints index ``class_names`` when given.
    class_names
        Names for integer labels (default: a built dataset's ``classes``; without names a label is
        written as its number).
    columns
        Grid columns (default: about a square grid). A still preview of videos has one row
        per video and one column per frame.
    scale
        Zoom factor for every image (default: the integer factor bringing the
        largest image side up to 128 pixels, or the fraction shrinking it to 128).
    animate
        For videos: an animation of ``T`` frames, `FRAME_MS` each, looping, whose frame ``t`` is the
        grid of every video's frame ``t`` with ``frame t/T`` written under it.

    Returns
    -------
    pathlib.Path
        ``path``. The PNG is ``columns * cell_w + (columns + 1) * 4`` pixels wide and
        ``rows * (cell_h + caption) + (rows + 1) * 4`` high, where ``cell_h x cell_w``
        is the largest image's zoomed size and ``caption`` 14 with labels, else 0 (an
        animation's frames have a 14-pixel row more, for the frame number).
    """
    n = check_int("n (how many examples to show)", n, 1)
    if class_names is None:
        class_names = getattr(data, "classes", None)
    examples = _examples(data, n, class_names)
    captions = None if labels is None else [_name(label, class_names) for label in list(labels)[: len(examples)]]
    if captions is not None and len(captions) != len(examples):
        raise ValueError(f"labels has {len(captions)} entries for {len(examples)} images; give one label per image")
    steps = len(examples[0])
    if animate and not _is_video(data):
        raise ValueError("animate=True plays the frames of videos, and these are still images: leave animate out "
                         "for a grid of them")
    images = [frame[0] for example in examples for frame in example]
    largest = max(max(image.shape[:2]) for image in images)
    if scale is None:
        scale = TARGET_SIDE // largest if largest <= TARGET_SIDE else TARGET_SIDE / largest
    if not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    cell = (math.ceil(max(image.shape[0] for image in images) * scale),
            math.ceil(max(image.shape[1] for image in images) * scale))
    columns = None if columns is None else check_int("columns", columns, 1)
    if not animate:
        if steps > 1:
            columns = steps
        cells = [frame for example in examples for frame in example]
        named = None if captions is None else [caption for caption in captions for _ in range(steps)]
        return _save([_sheet(cells, named, columns, scale, cell)], Path(path))
    sheets = [_sheet([example[t] for example in examples], captions, columns, scale, cell, f"frame {t + 1}/{steps}")
              for t in range(steps)]
    return _save(sheets, Path(path))


#: One image of a preview: the picture, its boxes (or None) and the names written by them.
Frame = tuple[np.ndarray, np.ndarray | None, Sequence[str]]


def _is_video(data: Any) -> bool:
    """Whether ``data``'s images are videos, ``(N, T, H, W, 3)``."""
    arrays = data.arrays if hasattr(data, "arrays") else data
    images = arrays.get("images") if isinstance(arrays, Mapping) else arrays
    return getattr(images, "ndim", 0) == 5


def _sheet(cells: list[Frame], captions: list[str] | None, columns: int | None, scale: float,
           cell: tuple[int, int], footer: str | None = None) -> Image.Image:
    """The grid of ``cells``, each ``cell`` (height, width) big, captioned; ``footer`` written under it."""
    cell_h, cell_w = cell
    caption_h = CAPTION_HEIGHT if captions is not None else 0
    footer_h = CAPTION_HEIGHT if footer is not None else 0
    columns = math.ceil(math.sqrt(len(cells))) if columns is None else columns
    rows = math.ceil(len(cells) / columns)
    width = columns * cell_w + (columns + 1) * GAP
    sheet = Image.new("RGB", (width, rows * (cell_h + caption_h) + (rows + 1) * GAP + footer_h), BACKDROP)
    draw = ImageDraw.Draw(sheet)
    for i, (image, boxes, names) in enumerate(cells):
        left = GAP + (i % columns) * (cell_w + GAP)
        top = GAP + (i // columns) * (cell_h + caption_h + GAP)
        sheet.paste(_zoomed(image, scale), (left, top))
        if boxes is not None:
            _draw_boxes(draw, boxes, names, scale, (left, top, cell_w, cell_h))
        if captions is not None:
            _draw_label(draw, captions[i], (255, 255, 255), (left, top + cell_h, cell_w, caption_h), (0, 0, 0, 0))
    if footer is not None:
        _draw_label(draw, footer, (255, 255, 255), (GAP, sheet.height - footer_h - GAP // 2, width - 2 * GAP,
                                                    footer_h), (0, 0, 0, 0))
    return sheet


def _save(sheets: list[Image.Image], path: Path) -> Path:
    """Write ``sheets`` at ``path``, creating its directory; atomically, with storage errors named.

    One sheet: a PNG. More: an animation, a GIF when ``path`` ends in ``.gif``, else an animated PNG.
    """
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the preview to {path}: it is a directory. Give a file name, such as "
                                f"{path / 'preview.png'}")
    with writing(path, "Give a PNG path on a disk with room that you can write to"):
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary:
            if len(sheets) == 1:
                sheets[0].save(temporary, format="PNG")
            else:
                sheets[0].save(temporary, format="GIF" if path.suffix.lower() == ".gif" else "PNG", save_all=True,
                               append_images=sheets[1:], duration=FRAME_MS, loop=0)
    return path


def _examples(data: Any, n: int, class_names: Sequence[str] | None) -> list[list[Frame]]:
    """The first ``n`` examples, each its frames (one for a still image) with their boxes and glyph names."""
    arrays = data.arrays if hasattr(data, "arrays") else data
    if isinstance(arrays, Mapping):
        if "images" not in arrays:
            raise ValueError(f"preview needs an 'images' array; the data has {', '.join(map(str, arrays))}")
        images = np.asarray(arrays["images"][:n])
        boxes = arrays.get("boxes")
        if boxes is None:
            return _frames(images, None, None)
        boxes = np.asarray(boxes[:n])
        labels = np.asarray(arrays["labels"][:n]) if "labels" in arrays else np.full(boxes.shape[:-1], -1)
        names = np.vectorize(lambda label: _name(label, class_names) if label >= 0 else "", otypes=[object])(labels)
        return _frames(images, boxes, names)
    if isinstance(data, np.ndarray):
        if data.ndim not in (3, 4, 5):
            raise ValueError(
                f"preview takes a batch of images (N, H, W) or (N, H, W, 3), or of videos (N, T, H, W, 3), got an "
                f"array of shape {data.shape}; for one image pass image[None]"
            )
        return _frames(data[:n], None, None)
    if isinstance(data, Sequence) and not isinstance(data, str) and len(data) > 0:
        return [[frame] for frame in _frames_of([np.asarray(image) for image in data[:n]], None, None)]
    raise TypeError(
        f"preview takes a built dataset, a dict of arrays, an image array or a list of images; got "
        f"{type(data).__name__}"
    )


def _frames(images: np.ndarray, boxes: np.ndarray | None, names: np.ndarray | None) -> list[list[Frame]]:
    """Each example of ``images`` (still ``(N, H, W[, 3])`` or videos ``(N, T, H, W, 3)``) as its frames."""
    if images.ndim != 5:
        return [[frame] for frame in _frames_of(list(images), boxes, names)]
    if not len(images):
        raise ValueError("there are no images to preview")
    return [_frames_of(list(video), None if boxes is None else boxes[i], None if names is None else names[i])
            for i, video in enumerate(images)]


def _frames_of(images: list[np.ndarray], boxes: np.ndarray | None, names: np.ndarray | None) -> list[Frame]:
    """``images`` checked, each with its boxes and names (rows of ``boxes`` and ``names``)."""
    checked = _checked(images)
    if boxes is None or names is None:
        return [(image, None, ()) for image in checked]
    return [(image, boxes[k], list(names[k])) for k, image in enumerate(checked)]


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
