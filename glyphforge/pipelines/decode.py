"""Image decoding with Pillow into uint8 arrays, the one place images are decoded."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Union

import numpy as np
from PIL import Image, UnidentifiedImageError

ImageSource = Union[bytes, str, "os.PathLike[str]"]


class ImageDecodeError(ValueError):
    """An image could not be decoded; the message names the file."""


def decode_image(source: ImageSource, *, channels: int = 1, name: str | None = None) -> np.ndarray:
    """Decode one image to a uint8 array.

    Parameters
    ----------
    source
        Encoded bytes, or a path to an image file.
    channels
        1 for grey ``(H, W)`` (Pillow's ``"L"`` conversion), 3 for RGB ``(H, W, 3)``.
        Transparent pixels are composited on black in both cases.
    name
        What to call the image in errors (defaults to the path, or ``"<bytes>"``).

    Returns
    -------
    numpy.ndarray
        A fresh, writable uint8 array.

    Raises
    ------
    ImageDecodeError
        When Pillow cannot decode the data.
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 (grey) or 3 (RGB), got {channels!r}")
    label = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    stream = io.BytesIO(source) if isinstance(source, bytes) else Path(source)
    try:
        with Image.open(stream) as image:
            image.load()
            return _to_array(image, channels)
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ImageDecodeError(
            f"cannot decode image {label}: {error}. Check that the file is a complete "
            "PNG/JPEG/... image (re-download or replace it)."
        ) from error


def _to_array(image: Image.Image, channels: int) -> np.ndarray:
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = np.asarray(image.convert("RGBA"), dtype=np.uint16)
        alpha = rgba[..., 3:4]
        rgb = ((rgba[..., :3] * alpha + 127) // 255).astype(np.uint8)
        composited = Image.fromarray(rgb, "RGB")
        image = composited
    mode = "L" if channels == 1 else "RGB"
    return np.array(image.convert(mode), dtype=np.uint8)
