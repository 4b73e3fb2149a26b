"""Steps every dataset module shares: upstream files (fetched, given or placed), archives, resizing.

Argument checks that are not about datasets live in :mod:`glyphforge._checks`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_shape
from glyphforge._files import existing_file
from glyphforge.context import DataContext
from glyphforge.hashes import check_hash
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resample_weights import METHODS, Method
from glyphforge.pipelines.resource import Resource, not_upstream


def check_shapes(shapes: Iterable[Any]) -> list[tuple[int, int]]:
    """Check every shape of ``shapes`` and drop repeats, keeping the first order."""
    return list(dict.fromkeys(check_shape(shape) for shape in shapes))


def check_method(method: str) -> Method:
    """Return ``method`` if :func:`glyphforge.pipelines.resize.resize` knows it, else raise a ValueError."""
    for known in METHODS:
        if method == known:
            return known
    raise ValueError(f"resize method {method!r} is unknown: use one of {', '.join(map(repr, METHODS))}")


def unknown(what: str, names: Sequence[str], known: Iterable[str], hint: str = "") -> ValueError:
    """Return the ValueError for unknown ``names`` of ``what``, listing the known ones."""
    listed = ", ".join(sorted(known))
    return ValueError(f"unknown {what} {', '.join(map(repr, names))}: the known ones are {listed}{hint}")


def upstream_file(resource: Resource, context: DataContext, given: PathLike | None = None,
                  checks: list[Callable[[], None]] | None = None) -> tuple[Path, bool]:
    """Return a local copy of ``resource`` (fetched when needed) and whether its hash was checked.

    Parameters
    ----------
    resource
        The upstream file.
    context
        Where data lives and how it may be fetched: fetched files go to
        ``<data dir>/raw/<resource.dataset>/``, through the context's mirrors and within its
        ``offline``; with ``verify`` False, ``given`` or a file already placed in the raw dir
        is used as it is (a download is always verified); ``progress`` shows a download bar.
    given
        A local copy to use in place (not copied) instead of the raw dir.
    checks
        Where given, the check of ``given``'s hash (which raises HashMismatchError) is appended
        to it instead of run: the caller runs it, e.g. while it reads the file, before anything
        made from the file is kept.

    Returns
    -------
    tuple of (Path, bool)
        The file, and False when it is used unchecked (``verify=False``).

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        When ``given`` does not exist or is a directory.
    HashMismatchError
        When ``verify`` and ``given``, or the file placed in the raw dir, is not the pinned
        file (it is left as it is: glyphforge never deletes a file it did not write).
    DownloadError
        When the file cannot be fetched (the message says where to place it by hand).
    """
    if given is None:
        placed = context.raw_dir(resource.dataset) / resource.filename
        if not context.verify and placed.is_file():
            return placed, False
        return fetch(resource, placed.parent, mirrors=context.mirrors, progress=context.progress,
                     offline=context.offline), True
    path = existing_file(given, f"a copy of {resource.url}")
    if context.verify:
        check = partial(_check_given, path, resource)
        if checks is None:
            check()
        else:
            checks.append(check)
    return path, context.verify


def _check_given(path: Path, resource: Resource) -> None:
    """Raise HashMismatchError when the local copy ``path`` is not ``resource``."""
    matches, actual = check_hash(path, resource.hash)
    if not matches:
        raise not_upstream(path, resource, actual, "It is incomplete or a different file: get a complete copy, "
                           "or pass verify=False (on the command line: --no-verify) to convert a custom file.")


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

    return resize(images, shape, method=check_method(method), batch=batch)


def given_archives(
    archives: Mapping[str, PathLike] | None, resources: Mapping[str, Resource], dataset: str
) -> dict[str, PathLike]:
    """Check ``archives`` (what the user has locally) against a dataset's upstream files.

    Parameters
    ----------
    archives
        ``{name: local path}``; a name is a key of ``resources`` (EMNIST: ``"gzip.zip"``;
        Omniglot: a set name such as ``"small1"``) or the upstream file name of one.
    resources
        The dataset's upstream files by name.
    dataset
        The dataset's name, for the error message.

    Returns
    -------
    dict
        ``{key of resources: path}``.

    Raises
    ------
    ValueError
        For a name that is none of the dataset's files (the message lists them).
    """
    by_file = {resource.filename: key for key, resource in resources.items()}
    chosen: dict[str, PathLike] = {}
    for name, path in (archives or {}).items():
        key = name if name in resources else by_file.get(name)
        if key is None:
            known = sorted({*resources, *by_file})
            raise ValueError(f"archives has {name!r}, which is not a file of {dataset}: use one of {', '.join(known)}")
        chosen[key] = path
    return chosen
