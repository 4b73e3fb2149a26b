"""The local backend: a folder on this machine, named by a plain path or a ``file://`` URL.

It reads, lists and sizes as fsspec's local filesystem does (so a ``file://`` URL fails as an
object store would, with the same errors), and writes as every file glyphforge writes: under a
temporary name beside its place, renamed when whole (its folders made, its mode following the
umask). A backend of another scheme over local folders subclasses it, saying where its URLs are
(`LocalBackend.path_of`) and how one is spelled (`LocalBackend.check`): its data dirs are then
read as local paths are.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from glyphforge._files import CHUNK_BYTES, atomic_path, remove_abandoned_staging, writing
from glyphforge.storage.fsspec_backend import FsspecBackend
from glyphforge.urls import file_path

__all__ = ["LocalBackend"]


class LocalBackend(FsspecBackend):
    """A ``file://`` URL (or a plain path: `glyphforge.storage.backends.backend_for`) on this machine."""

    protocol = "file"

    @classmethod
    def check(cls, url: str) -> str:
        """The URL of the absolute path it names, percent-escaped (``file://`` naming no path is malformed)."""
        return f"file://{quote(file_path(url).as_posix())}"

    @classmethod
    def path_of(cls, url: str) -> Path:
        """The absolute path the URL ``url`` names on this machine (`glyphforge.urls.file_path`)."""
        return file_path(url)

    @property
    def local_path(self) -> Path:
        """The path the URL names."""
        return self.path_of(self.url)

    @property
    def path(self) -> str:
        """The path the URL names, as fsspec's local filesystem takes it."""
        return self.local_path.as_posix()

    def not_replaceable(self) -> str | None:
        """A symbolic link at the path (a user's: glyphforge writes files, never links) is "a symbolic link to ..."."""
        path = self.local_path
        if not path.is_symlink():
            return None
        try:
            return f"a symbolic link (to {os.readlink(path)})"
        except OSError:
            return "a symbolic link"

    def remove_abandoned(self, names: Iterable[str]) -> list[str]:
        """Remove the temporary files killed writers of ``names`` left in the folder (`remove_abandoned_staging`:
        never a live writer's, nor a file of another name); what cannot be removed (another user's) stays."""
        removed, _ = remove_abandoned_staging(self.local_path, names)
        return [path.name for path in removed]

    def _made_place(self) -> Path:
        """The path, with its folder made."""
        path = self.local_path
        with writing(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write(self, data: bytes) -> None:
        """Write ``data`` under a temporary name and rename it."""
        with atomic_path(self._made_place()) as temporary:
            temporary.write_bytes(data)

    def upload(self, source: Path, *, sent: Callable[[int], object] | None = None, **options: Any) -> None:
        """Copy ``source`` under a temporary name and rename it (``options``, a store's upload settings, do not
        apply)."""
        with atomic_path(self._made_place()) as temporary, open(source, "rb") as reading, \
                open(temporary, "wb") as out:
            while chunk := reading.read(CHUNK_BYTES):
                out.write(chunk)
                if sent is not None:
                    sent(len(chunk))
