"""`Writer`: the staging of one new cache entry, committed by :meth:`CacheStore.create
<glyphforge.cache.store.CacheStore.create>`."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike
from glyphforge._files import writing
from glyphforge.cache.manifest import check_file_name
from glyphforge.cache.pklz import write_array_pklz, write_pklz


@dataclass
class Writer:
    """Stages the files of one entry; committed by :meth:`CacheStore.create`.

    Attributes
    ----------
    path
        The staging directory: files written here become the entry's files.
    meta
        JSON-serialisable extra information, saved as ``manifest["meta"]``.
    """

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    known_sha256: dict[str, str] = field(default_factory=dict)
    """The sha256 of files the caller hashed while writing them (``concat_pklz`` does): committing
    records these instead of reading the files again."""
    manifest: dict[str, Any] | None = None
    """The manifest of an entry copied from elsewhere (a data dir at a URL), committed as it is
    (its ``created`` and versions kept) instead of a new one; ``meta`` is then unused, and the staged
    files must be exactly its files table."""

    def write(self, name: str, obj: Any, level: int | None = None) -> Path:
        """Write ``obj`` as the gzipped pickle ``name`` (see :func:`~glyphforge.cache.pklz.dump_pklz`), recording its
        sha256."""
        path = self.path / check_file_name(name)
        self.known_sha256[name] = write_pklz(obj, path, level=level)
        return path

    def write_array(self, name: str, shape: tuple[int, ...], dtype: np.dtype[Any] | type,
                    fill: Callable[[np.ndarray], None], level: int | None = None) -> Path:
        """Write the array of ``shape`` and ``dtype`` that ``fill`` fills (in place, inside its pickle) as the file
        ``name`` (see :func:`~glyphforge.cache.pklz.write_array_pklz`), recording its sha256."""
        path = self.path / check_file_name(name)
        self.known_sha256[name] = write_array_pklz(path, shape, dtype, fill, level=level)
        return path

    def add_file(self, name: str, source: PathLike) -> Path:
        """Move an already written file into the entry as ``name``."""
        destination = self.path / check_file_name(name)
        with writing(destination):
            shutil.move(os.fspath(source), destination)
        return destination
