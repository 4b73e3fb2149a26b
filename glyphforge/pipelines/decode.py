"""Image decoding with Pillow into uint8 arrays, the one place images are decoded.

Decompression bombs (a small file declaring a huge image) are refused from the size in
the image's header, before its pixels are decoded: beyond ``max_pixels`` when the
caller knows what its images may be (an Omniglot drawing is 105x105), else beyond
Pillow's own limit (``PIL.Image.MAX_IMAGE_PIXELS``, twice of which Pillow refuses).
Every failure is an :class:`ImageDecodeError` naming the image (for an archive's
image: the member and the archive).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from glyphforge.errors import IntegrityError

ImageSource = Union[bytes, bytearray, str, "os.PathLike[str]"]


class ImageDecodeError(IntegrityError, ValueError):
    """An image could not be decoded; the message names the file."""


def decode_image(
    source: ImageSource, *, channels: int = 1, name: str | None = None, max_pixels: int | None = None
) -> np.ndarray:
    """Decode one image to a uint8 array.

    Parameters
    ----------
    source
        Encoded bytes, or a path to an image file.
    channels
        1 for grey ``(H, W)`` (Pillow's ``"L"`` conversion), 3 for RGB ``(H, W, 3)``.
        Transparent pixels are composited on black in both cases.
    name
        What to call the image in errors (defaults to the path, or ``"<bytes>"``), e.g.
        ``"<member> in <zip>"`` for an archive's image.
    max_pixels
        Refuse an image whose header declares more pixels than this, before decoding
        it; None: Pillow's own limit.

    Returns
    -------
    numpy.ndarray
        A fresh, writable uint8 array.

    Raises
    ------
    ImageDecodeError
        When Pillow cannot decode the data, or the image has more than ``max_pixels``
        (or than Pillow's limit).
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 (grey) or 3 (RGB), got {channels!r}")
    stream: io.BytesIO | Path
    if isinstance(source, (bytes, bytearray)):
        stream, label = io.BytesIO(source), name or "<bytes>"
    else:
        stream, label = Path(source), name or str(source)
    try:
        with Image.open(stream) as image:
            _check_pixels(image, label, max_pixels)
            image.load()
            return _to_array(image, channels)
    except (FileNotFoundError, ImageDecodeError):
        raise
    except Image.DecompressionBombError as error:
        raise ImageDecodeError(
            f"cannot decode image {label}: {error} Replace it with a good copy (download it again)."
        ) from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ImageDecodeError(
            f"cannot decode image {label}: {error}. Check that the file is a complete "
            "PNG/JPEG/... image (re-download or replace it)."
        ) from error


def _check_pixels(image: Image.Image, label: str, max_pixels: int | None) -> None:
    """Refuse an image whose header declares more than ``max_pixels`` pixels (nothing is decoded yet)."""
    width, height = image.size
    if max_pixels is not None and width * height > max_pixels:
        raise ImageDecodeError(
            f"cannot decode image {label}: its header declares {width}x{height} pixels ({width * height:,}), "
            f"more than the {max_pixels:,} such an image may have: a decompression bomb, or not the image it "
            "should be. Replace it with a good copy (download it again)."
        )


def _to_array(image: Image.Image, channels: int) -> np.ndarray:
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = np.asarray(image.convert("RGBA"), dtype=np.uint16)
        alpha = rgba[..., 3:4]
        rgb = ((rgba[..., :3] * alpha + 127) // 255).astype(np.uint8)
        composited = Image.fromarray(rgb, "RGB")
        image = composited
    mode = "L" if channels == 1 else "RGB"
    return np.array(image.convert(mode), dtype=np.uint8)
