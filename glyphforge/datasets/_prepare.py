"""Steps shared by the Omniglot and backgrounds modules: argument checks, upstream files, resizing.

EMNIST has its own copies of a few checks (it was written in parallel); these are the
ones :mod:`glyphforge.datasets.omniglot` and :mod:`glyphforge.datasets.backgrounds` share.
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge import config
from glyphforge.pipelines.download import Attempt, HashMismatchError, Resource, fetch
from glyphforge.pipelines.hashes import check_hash
from glyphforge.pipelines.resample_weights import METHODS

PathLike = str | os.PathLike[str]


def check_shape(shape: Any) -> tuple[int, int]:
    """Return ``shape`` as ``(height, width)`` of positive ints, or raise a ValueError saying how to write it."""
    try:
        sides = tuple(shape)
    except TypeError:
        sides = ()
    if len(sides) != 2 or any(
        isinstance(side, bool) or not isinstance(side, numbers.Integral) or side < 1 for side in sides
    ):
        raise ValueError(f"shape {shape!r} is invalid: give (height, width) as two positive integers, e.g. (28, 28)")
    return int(sides[0]), int(sides[1])


def check_shapes(shapes: Iterable[Any]) -> list[tuple[int, int]]:
    """Check every shape of ``shapes`` and drop repeats, keeping the first order."""
    return list(dict.fromkeys(check_shape(shape) for shape in shapes))


def check_method(method: str) -> str:
    """Return ``method`` if :func:`glyphforge.pipelines.resize.resize` knows it, else raise a ValueError."""
    if method not in METHODS:
        raise ValueError(f"resize method {method!r} is unknown: use one of {', '.join(map(repr, METHODS))}")
    return method


def unknown(what: str, names: Sequence[str], known: Iterable[str], hint: str = "") -> ValueError:
    """Return the ValueError for unknown ``names`` of ``what``, listing the known ones."""
    listed = ", ".join(sorted(known))
    return ValueError(f"unknown {what} {', '.join(map(repr, names))}: the known ones are {listed}{hint}")


def upstream_file(
    resource: Resource,
    *,
    data_dir: PathLike | None,
    mirrors: Sequence[str] | str | None,
    verify: bool,
    progress: bool,
    given: PathLike | None = None,
) -> tuple[Path, bool]:
    """Return a local copy of ``resource`` (fetched when needed) and whether its hash was checked.

    Parameters
    ----------
    resource
        The upstream file.
    data_dir
        The data dir; fetched files go to ``<data dir>/raw/<resource.dataset>/``.
    mirrors
        Mirror bases tried before the origin (then ``$GLYPHFORGE_MIRROR``).
    verify
        Check the hash of ``given`` and of a file already placed in the raw dir.
        False uses such files as they are (a download is always verified).
    progress
        Show a download progress bar.
    given
        A local copy to use in place (not copied) instead of the raw dir.

    Returns
    -------
    tuple of (Path, bool)
        The file, and False when it is used unchecked (``verify=False``).

    Raises
    ------
    FileNotFoundError
        When ``given`` does not exist.
    HashMismatchError
        When ``verify`` and ``given`` is not the pinned file.
    DownloadError
        When the file cannot be fetched (the message says where to place it by hand).
    """
    if given is None:
        placed = config.raw_dir(resource.dataset, data_dir) / resource.filename
        if not verify and placed.is_file():
            return placed, False
        return fetch(resource, placed.parent, mirrors=mirrors or (), progress=progress), True
    path = Path(given).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give the path of a copy of {resource.url}")
    if verify:
        matches, actual = check_hash(path, resource.hash)
        if not matches:
            size = path.stat().st_size
            pinned = f"{resource.size:,} bytes" if resource.size is not None else "size not pinned"
            raise HashMismatchError(
                f"{path} is not {resource.url}: its hash is {actual} ({size:,} bytes), expected {resource.hash} "
                f"({pinned}). It is incomplete or a different file: get a complete copy, or pass verify=False "
                "to convert a custom file.",
                resource=resource,
                target=path,
                attempts=(Attempt(str(path), "hash mismatch", actual_hash=actual, actual_size=size),),
            )
    return path, verify


def resized(images: np.ndarray, shape: tuple[int, int], method: str, *, batch: bool) -> np.ndarray:
    """Resize with the numba kernels (imported here, so that loading from the cache never pays for numba).

    Parameters
    ----------
    images
        uint8 ``(N, H, W)`` when ``batch``, or one ``(H, W, C)`` image.
    shape, method
        As in :func:`glyphforge.pipelines.resize.resize`.
    batch
        Whether the first axis indexes images.
    """
    from glyphforge.pipelines.resize import resize

    return resize(images, shape, method=method, batch=batch)
