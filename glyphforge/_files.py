"""File helpers every layer shares: hashing a file, and atomic replacement of a file.

This module imports nothing from glyphforge, so anything may use it.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from glyphforge._checks import PathLike

CHUNK_BYTES = 1 << 22


class Digest(Protocol):
    """What :func:`hash_file` feeds: anything with ``update(bytes)``, e.g. a ``hashlib`` object."""

    def update(self, data: bytes, /) -> None: ...


DigestT = TypeVar("DigestT", bound=Digest)


def hash_file(path: PathLike, digest: DigestT) -> DigestT:
    """Feed a file's bytes to ``digest``, read in chunks (never whole into memory), and return it.

    Parameters
    ----------
    path
        The file to read.
    digest
        A hash object such as ``hashlib.sha256()``; one already fed a prefix (a git blob
        header) continues from it.

    Returns
    -------
    The same ``digest``, fed every byte of the file: call ``.hexdigest()`` on it.
    """
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest


def sha256_file(path: PathLike) -> str:
    """Return the hex sha256 of a file's bytes, read in chunks (never whole into memory)."""
    return hash_file(path, hashlib.sha256()).hexdigest()


@contextmanager
def atomic_path(destination: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; replace ``destination`` with it on success.

    The temporary file (``.<name>.<random>.tmp`` in the same directory, so the final
    ``os.replace`` is atomic) is removed when the block raises, so a reader never sees
    a half-written ``destination``: it is either the old file or the complete new one.

    Examples
    --------
    >>> with atomic_path("out.json") as temporary:          # doctest: +SKIP
    ...     temporary.write_text("{}")
    """
    destination = Path(destination)
    descriptor, name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    os.close(descriptor)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, destination)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
