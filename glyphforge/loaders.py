"""Framework-neutral loading: `ImageList` for users' own image files, plus the batching layer.

:func:`batches`, :func:`batch_indices` and :class:`MapStyleDataset` live in
`glyphforge.batching` and are re-exported here: every dataset in glyphforge
(EMNIST, Omniglot, built scenes, :class:`ImageList`) is map-style, ``len(ds)`` and
``ds[i] -> (image, label)``, with ``ds.batches(...)``.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_shape
from glyphforge.batching import Indexable, MapStyleDataset, batch_indices, batches
from glyphforge.pipelines.resample_weights import METHODS, Method

__all__ = ["ImageList", "Indexable", "MapStyleDataset", "batch_indices", "batches"]


class ImageList(MapStyleDataset):
    """Image files plus optional labels, loaded lazily or eagerly, as a dataset.

    Parameters
    ----------
    images
        A list file (path), or a Python sequence of image paths. A list file is
        UTF-8 text with one image path per line; surrounding whitespace is
        stripped, trailing blank lines are ignored, any other blank line is an
        error (it would shift the pairing with a labels file), and there are
        no comments (``#`` is part of a file name). Relative paths are resolved
        against ``root``, else against the list file's folder (for a Python
        sequence: against ``root``, else the current directory). Every file must
        exist when the ``ImageList`` is made.
    labels
        ``None``, a labels file (path), or an array-like with one label per image.
        Line *n* of a labels file is the label of image *n*: whitespace-separated
        numbers, the same count on every line (same blank-line rules as above).
        One number per line gives a 1-D array, *k* numbers an ``(N, k)`` array;
        int64 when every number is an integer literal, else float32. Without labels,
        ``ds[i]`` gives the label -1, which a PyTorch ``DataLoader`` batches.
    shape
        ``(height, width)`` every image is resized to, when it is read, with
        :func:`glyphforge.pipelines.resize.resize`; ``None`` keeps native sizes
        (then only equally sized images can be stacked into batches).
    channels
        1 for grey ``(H, W)`` images, 3 for RGB ``(H, W, 3)``; conversion is
        :func:`glyphforge.pipelines.decode.decode_image` (alpha on black).
    root
        Folder that relative image paths are resolved against.
    method
        ``"box"`` (default), ``"bilinear"``, ``"lanczos"`` or ``"area"``, passed
        to ``resize``. ``"box"`` averages the source pixels under each output
        pixel (no aliasing when shrinking) and equals Pillow's
        ``Image.resize(..., Image.BOX)`` exactly; prefer ``"area"`` for exact
        coverage-weighted means at non-integer shrink factors, and
        ``"bilinear"`` for enlarging.

    Attributes
    ----------
    paths : list of pathlib.Path
        The image files, in order.
    images
        Before :meth:`load`: a lazy sequence; ``images[i]`` decodes (and resizes)
        one image, ``images[index_array]`` or a slice stacks a uint8 batch.
        After :meth:`load`: the stacked uint8 array.
    labels : numpy.ndarray or None

    Raises
    ------
    FileNotFoundError
        A listed image (or the list file) is missing; names the list line.
    ValueError
        Bad ``shape``/``channels``/``method``, an empty image list, a blank line, a label
        that is not a number, a labels line with a different count of numbers,
        or a different number of labels and images (names the first unpaired line).

    Decoding errors (:class:`~glyphforge.pipelines.decode.ImageDecodeError`,
    naming the file and its list line) surface when an image is first read.
    """

    def __init__(
        self,
        images: PathLike | Sequence[PathLike],
        labels: PathLike | Any | None = None,
        *,
        shape: tuple[int, int] | None = None,
        channels: int = 1,
        root: PathLike | None = None,
        method: Method = "box",
    ) -> None:
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 (grey) or 3 (RGB), got {channels!r}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
        shape = None if shape is None else check_shape(shape)
        paths, source = _image_paths(images, root)
        if not paths:
            raise ValueError(f"{source.name} lists no images")
        _check_files_exist(paths, source)
        self.paths = paths
        self.images: _ImageFiles | np.ndarray = _ImageFiles(
            paths, source, channels=channels, shape=shape, method=method
        )
        self.labels = None if labels is None else _paired_labels(labels, source, len(paths))

    def load(self) -> np.ndarray:
        """Decode (and resize) every image once; keep and return the stacked array.

        Returns
        -------
        numpy.ndarray
            uint8 ``(N, H, W)``, or ``(N, H, W, 3)`` with ``channels=3``. It
            replaces :attr:`images`, so indexing and batches then read memory.
        """
        if isinstance(self.images, _ImageFiles):
            self.images = self.images[:]
        return self.images

    def __repr__(self) -> str:
        state = "loaded" if isinstance(self.images, np.ndarray) else "lazy"
        return f"ImageList({len(self)} images, {state}, labels={self.labels is not None})"


@dataclass(frozen=True)
class _Source:
    """Where a list came from: a list file (numbered lines) or a Python sequence."""

    name: str
    is_file: bool

    def at(self, index: int) -> str:
        return f"{self.name} line {index + 1}" if self.is_file else f"{self.name}[{index}]"


class _ImageFiles:
    """An :class:`ImageList`'s images before ``load()``, read on demand."""

    def __init__(self, paths: list[Path], source: _Source, *, channels: int,
                 shape: tuple[int, int] | None, method: Method) -> None:
        self.paths, self.source = paths, source
        self.channels, self.shape, self.method = channels, shape, method

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: Any) -> np.ndarray:
        positions = np.arange(len(self.paths))[index]
        return self._read(int(positions)) if positions.ndim == 0 else self._stack(positions)

    def _read(self, i: int) -> np.ndarray:
        path = self.paths[i]
        try:
            from glyphforge.pipelines.decode import decode_image  # Pillow only once images are read

            image = decode_image(path, channels=self.channels, name=f"{path} ({self.source.at(i)})")
        except FileNotFoundError:
            raise FileNotFoundError(_missing(self.source, i, path)) from None
        if self.shape is None:
            return image
        from glyphforge.pipelines.resize import resize  # numba: imported only when resizing

        return resize(image, self.shape, method=self.method, batch=False)

    def _stack(self, positions: np.ndarray) -> np.ndarray:
        batch = None
        for j, i in enumerate(positions.tolist()):
            image = self._read(i)
            if batch is None:
                batch, first = np.empty((len(positions), *image.shape), np.uint8), i
            elif image.shape != batch.shape[1:]:
                raise ValueError(
                    f"{self.source.at(i)} ({self.paths[i]}) is {_size(image)} but "
                    f"{self.source.at(first)} ({self.paths[first]}) is {_size(batch[0])}; "
                    "pass shape=(height, width) to resize them to one size"
                )
            batch[j] = image
        return np.empty((0, *self._read(0).shape), np.uint8) if batch is None else batch


def _size(image: np.ndarray) -> str:
    return f"{image.shape[0]}x{image.shape[1]} (height x width)"


def _missing(source: _Source, index: int, path: Path) -> str:
    return f"{source.at(index)}: no such image file {path}"


def _image_paths(images: PathLike | Sequence[PathLike], root: PathLike | None) -> tuple[list[Path], _Source]:
    if isinstance(images, (str, os.PathLike)):
        list_file = Path(images)
        base = Path(root) if root is not None else list_file.parent
        return [base / line for line in _read_lines(list_file)], _Source(str(list_file), True)
    base = Path(root) if root is not None else Path()
    return [base / path for path in images], _Source("images", False)


def _check_files_exist(paths: list[Path], source: _Source) -> None:
    missing = [i for i, path in enumerate(paths) if not path.is_file()]
    if missing:
        more = f" ({len(missing)} listed files are missing)" if len(missing) > 1 else ""
        raise FileNotFoundError(_missing(source, missing[0], paths[missing[0]]) + more)


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text list: {error}") from None
    lines = [line.strip() for line in text.rstrip().splitlines()]
    for number, line in enumerate(lines, 1):
        if not line:
            raise ValueError(
                f"{path} line {number} is blank; every line must be an entry "
                "(a blank line would shift the pairing of images and labels)"
            )
    return lines


_INTEGER = re.compile(r"[+-]?\d+")


def _parse_labels(path: Path) -> np.ndarray:
    rows: list[list[int | float]] = []
    for number, line in enumerate(_read_lines(path), 1):
        tokens = line.split()
        if rows and len(tokens) != len(rows[0]):
            raise ValueError(f"{path} line {number} has {len(tokens)} values but line 1 has {len(rows[0])}")
        try:
            rows.append([int(t) if _INTEGER.fullmatch(t) else float(t) for t in tokens])
        except ValueError as error:
            raise ValueError(f"{path} line {number}: label is not a number ({error})") from None
    integral = all(isinstance(value, int) for row in rows for value in row)
    width = len(rows[0]) if rows else 1
    values = np.array(rows, dtype=np.int64 if integral else np.float32).reshape(len(rows), width)
    return values[:, 0] if width == 1 else values


def _paired_labels(labels: PathLike | Any, images: _Source, count: int) -> np.ndarray:
    if isinstance(labels, (str, os.PathLike)):
        values, source = _parse_labels(Path(labels)), _Source(str(labels), True)
    else:
        values, source = np.asarray(labels), _Source("labels", False)
    if len(values) < count:
        raise ValueError(f"{images.at(len(values))} has no label: {count} images but {len(values)} labels")
    if len(values) > count:
        raise ValueError(f"{source.at(count)} has no image: {count} images but {len(values)} labels")
    return values
