"""Hash strings such as ``sha256:<hex>``: parsing, computing and checking.

Three algorithms are understood:

* ``sha256:<64 hex>`` and ``md5:<32 hex>``: digests of the file's bytes;
* ``git-blob-sha1:<40 hex>``: a file's git blob id, the sha1 of
  ``b"blob <size>\\0" + content`` (what ``git hash-object`` prints), for files pinned
  by their id in a git repository.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from glyphforge._checks import PathLike
from glyphforge._files import CHUNK_BYTES

if TYPE_CHECKING:
    from hashlib import _Hash

#: Hex digest length of each supported algorithm.
ALGORITHMS: dict[str, int] = {"sha256": 64, "md5": 32, "git-blob-sha1": 40}

_HEX = set("0123456789abcdef")


def parse_hash(spec: str) -> tuple[str, str]:
    """Split a hash string into ``(algorithm, lowercase hex digest)``.

    Parameters
    ----------
    spec
        ``"<algorithm>:<hex>"`` with an algorithm from :data:`ALGORITHMS`.

    Raises
    ------
    ValueError
        When the algorithm is unknown or the digest is not hex of the right length.
    """
    algorithm, sep, digest = str(spec).partition(":")
    digest = digest.strip().lower()
    known = ", ".join(f"{name}:<{length} hex digits>" for name, length in ALGORITHMS.items())
    if not sep or algorithm not in ALGORITHMS:
        raise ValueError(f"hash {spec!r} is not understood: write it as one of {known}")
    if len(digest) != ALGORITHMS[algorithm] or not set(digest) <= _HEX:
        raise ValueError(
            f"hash {spec!r} is malformed: a {algorithm} digest is "
            f"{ALGORITHMS[algorithm]} hex digits (0-9, a-f)"
        )
    return algorithm, digest


def normalise_hash(spec: str) -> str:
    """Return ``spec`` validated and in canonical form (lowercase hex)."""
    algorithm, digest = parse_hash(spec)
    return f"{algorithm}:{digest}"


def file_hash(path: PathLike, algorithm: str) -> str:
    """Return the hash string (``"<algorithm>:<hex>"``) of the file at ``path``.

    Parameters
    ----------
    path
        The file to hash; it is read in chunks, never whole into memory.
    algorithm
        One of :data:`ALGORITHMS`.
    """
    return file_hashes(path, [algorithm])[0]


def file_hashes(path: PathLike, algorithms: Iterable[str]) -> list[str]:
    """Return the hash strings of the file at ``path`` for each of ``algorithms``, reading it once.

    Parameters
    ----------
    path
        The file to hash; it is read in chunks, never whole into memory.
    algorithms
        Names from :data:`ALGORITHMS`, e.g. ``["md5", "sha256"]``: a pinned hash and the file's own.
    """
    names = list(algorithms)
    size = os.stat(path).st_size
    digests = [_new_digest(name, size) for name in names]
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            for digest in digests:
                digest.update(chunk)
    return [f"{name}:{digest.hexdigest()}" for name, digest in zip(names, digests, strict=True)]


def check_hash(path: PathLike, expected: str) -> tuple[bool, str]:
    """Compare a file with a hash string.

    Parameters
    ----------
    path
        The file to check.
    expected
        A hash string such as ``"md5:68d2efa1b9178cc56df9314c21c6e718"``.

    Returns
    -------
    tuple of (bool, str)
        Whether the file matches, and its actual hash string (same algorithm).
    """
    algorithm, digest = parse_hash(expected)
    actual = file_hash(path, algorithm)
    return actual == f"{algorithm}:{digest}", actual


def _new_digest(algorithm: str, size: int) -> _Hash:
    """Return a fresh hash object for ``algorithm``; a git blob's is already fed its header (``size`` bytes)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown hash algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    if algorithm == "git-blob-sha1":
        return hashlib.sha1(f"blob {size}\0".encode("ascii"), usedforsecurity=False)
    return hashlib.new(algorithm, usedforsecurity=False)
