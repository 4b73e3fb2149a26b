"""Writing and listing objects at a URL so that a reader never sees a partial one.

An object store's put makes the whole object at once; a ``file://`` URL is a local file,
so it is written under a temporary name beside its place and renamed when whole (its
folders are made, and its mode follows the umask, as every file glyphforge writes). These
functions raise the store's own errors: callers say what they were doing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glyphforge._files import CHUNK_BYTES, atomic_path, writing
from glyphforge.storage.location import Location

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem
    from fsspec.callbacks import Callback

__all__ = ["file_sizes", "is_local", "listed_files", "upload_file", "write_bytes"]


def is_local(fs: AbstractFileSystem) -> bool:
    """Whether ``fs`` is fsspec's local filesystem (a ``file://`` URL)."""
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _local_path(where: Location) -> Path | None:
    """The path of a ``file://`` ``where`` with its folder made; None for an object store."""
    if not is_local(where.fs):
        return None
    path = Path(where.path)
    with writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_bytes(where: Location, data: bytes) -> None:
    """Write ``data`` as the object ``where``: a reader sees the old one, or the whole new one."""
    local = _local_path(where)
    if local is None:
        where.fs.pipe_file(where.path, data)
        return
    with atomic_path(local) as temporary:
        temporary.write_bytes(data)


def upload_file(source: Path, where: Location, *, callback: Callback | None = None, **options: Any) -> None:
    """Copy the local file ``source`` to the object ``where``: a reader sees it whole or not at all.

    ``callback`` (an fsspec `Callback`) is told the bytes sent; ``options`` go to the store's
    ``put_file`` (e.g. s3fs's ``chunksize`` and ``max_concurrency`` of a multipart upload).
    """
    local = _local_path(where)
    if local is None:
        if callback is not None:  # fsspec's stores take no None: their default is a no-op callback
            options["callback"] = callback
        where.fs.put_file(os.fspath(source), where.path, **options)
        return
    with atomic_path(local) as temporary, open(source, "rb") as reading, open(temporary, "wb") as out:
        while chunk := reading.read(CHUNK_BYTES):
            out.write(chunk)
            if callback is not None:
                callback.relative_update(len(chunk))


def listed_files(folder: Location) -> dict[str, dict[str, Any]]:
    """What the store says of each object (file) directly under ``folder`` (its size, checksums...), by name;
    empty when there is none. Fresh from the store (fsspec's listing cache is dropped first)."""
    fs = folder.fs
    fs.invalidate_cache(folder.path)
    try:
        listed = fs.ls(folder.path, detail=True)
    except FileNotFoundError:
        return {}
    return {str(info["name"]).rstrip("/").rsplit("/", 1)[-1]: info for info in listed if info.get("type") == "file"}


def file_sizes(folder: Location) -> dict[str, int]:
    """The size of each object (file) directly under ``folder``, by name; empty when there is none."""
    return {name: int(info["size"]) for name, info in listed_files(folder).items()}
