"""Writing and listing objects at a URL so that a reader never sees a partial one.

Each is done by the URL's backend (`Location.backend`): an object store's put makes the whole
object at once; a ``file://`` URL is a local file, so it is written under a temporary name
beside its place and renamed when whole (its folders are made, and its mode follows the umask,
as every file glyphforge writes); an HTTP URL refuses every write
(`glyphforge.storage.backend.ReadOnlyStoreError`). These functions raise the store's own
errors: callers say what they were doing.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from glyphforge.storage.location import Location

__all__ = ["file_sizes", "listed_files", "upload_file", "write_bytes"]


def write_bytes(where: Location, data: bytes) -> None:
    """Write ``data`` as the object ``where``: a reader sees the old one, or the whole new one."""
    where.backend.write(data)


def upload_file(source: Path, where: Location, *, sent: Callable[[int], object] | None = None, **options: Any,
                ) -> None:
    """Copy the local file ``source`` to the object ``where``: a reader sees it whole or not at all.

    ``sent`` is told the bytes of each piece sent; ``options`` go to the store's
    ``put_file`` (e.g. s3fs's ``chunksize`` and ``max_concurrency`` of a multipart upload).
    """
    where.backend.upload(source, sent=sent, **options)


def listed_files(folder: Location) -> dict[str, dict[str, Any]]:
    """What the store says of each object (file) directly under ``folder`` (its size, checksums...), by name;
    empty when there is none. Fresh from the store (fsspec's listing cache is dropped first)."""
    return folder.backend.files()


def file_sizes(folder: Location) -> dict[str, int]:
    """The size of each object (file) directly under ``folder``, by name; empty when there is none."""
    return {name: int(info["size"]) for name, info in listed_files(folder).items()}
