"""`preview`: a PNG grid of examples, with boxes and labels drawn, to look at data before training."""
from __future__ import annotations

import math
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
        is drawn with its class name (``class_names[label]``). Or plain images:
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
    font = ImageFont.load_default(11)
    for i, image in enumerate(images):
        left = GAP + (i % columns) * (cell_w + GAP)
        top = GAP + (i // columns) * (cell_h + caption_h + GAP)
        sheet.paste(_zoomed(image, scale), (left, top))
        if boxes is not None:
            _draw_boxes(draw, font, boxes[i], glyph_names[i], scale, (left, top))
        if captions is not None:
            draw.text((left, top + cell_h + 1), captions[i], fill=(255, 255, 255), font=font)
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
    draw: ImageDraw.ImageDraw,
    font: ImageFont.FreeTypeFont | ImageFont.ImageFont,
    boxes: np.ndarray,
    names: Sequence[str],
    scale: float,
    origin: tuple[int, int],
) -> None:
    """Outline each real box (padding rows are -1) and write its class name at its corner."""
    for slot, (box, name) in enumerate(zip(boxes, names, strict=True)):
        if box[0] < 0:
            continue
        top, left, bottom, right = (float(value) * scale for value in box)
        colour = BOX_COLOURS[slot % len(BOX_COLOURS)]
        draw.rectangle(
            (origin[0] + left, origin[1] + top, origin[0] + right - 1, origin[1] + bottom - 1), outline=colour
        )
        if name:  # above the box, or below it when the box touches the top
            text_top = top - CAPTION_HEIGHT if top >= CAPTION_HEIGHT else bottom
            draw.text((origin[0] + left, origin[1] + text_top), str(name), fill=colour, font=font)
