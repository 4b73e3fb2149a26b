"""A complete cache entry (`Entry`), wherever it lies, how its data files are reached (`DataFiles`), how one is read
from its directory (`read_entry`), and the errors of its files.

An entry directory whose manifest fails `glyphforge.cache.manifest.read_manifest` is
broken: `read_entry` returns None. One this user may not read (another user of a shared
data dir made it owner-only) is not broken: `read_entry` raises `UnreadableEntryError`.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from glyphforge._files import describe_owner
from glyphforge.cache.locks import ReadLock, readers_path
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, ManifestFields, read_manifest
from glyphforge.cache.pklz import DamagedPklzError, iter_pklz, load_pklz
from glyphforge.errors import AccessError, IntegrityError, os_error_text


class MissingEntryFileError(IntegrityError, FileNotFoundError):
    """A data file an entry's manifest lists is not on disk; the message names it and how to make the entry again.

    ``errno`` is ``ENOENT`` and ``filename`` the missing file.
    """

    def __str__(self) -> str:
        return os_error_text(self)


class DamagedEntryFileError(DamagedPklzError):
    """A data file of an entry is not the size its manifest records; the message names it and the fix.

    ``path`` is the file, ``size`` its size in bytes and ``expected`` the size its manifest records.
    """

    def __init__(self, message: str, path: Path, size: int, expected: int) -> None:
        super().__init__(message)
        self.path, self.size, self.expected = path, size, expected


class UnreadableEntryError(AccessError, PermissionError):
    """An entry exists but this user may not read it (another user's, made owner-only); the message says what to do.

    It is not broken: glyphforge neither makes it again nor removes it. ``errno`` is
    ``EACCES`` and ``filename`` the entry directory, or the data file this user may not read.
    """

    def __str__(self) -> str:
        return os_error_text(self)


def unreadable_text(path: Path, opened_by: Path | None = None) -> str:
    """Why this user may not read ``path`` (an entry, a folder or a file of the store), and what to do.

    ``opened_by``: what its owner should open to the group (default ``path``), e.g. a file's entry.
    """
    return (f"permission is denied ({describe_owner(path)}). Another user made it "
            "readable by its owner only (with a umask of 077, or with an older glyphforge, which made every entry "
            f"so); it is not broken and glyphforge leaves it alone. Ask its owner to run "
            f"`chmod -R g+rX {opened_by or path}` "
            "(and to work with `umask 002` in a data dir a group shares), or use a data dir of your own "
            "(--data-dir or $GLYPHFORGE_DATA_DIR)")


class DataFiles(Protocol):
    """Where an entry lies and how its data files are reached on this machine: a path to each, checked against the
    manifest.

    An entry on disk reads them in its folder (`IN_FOLDER`); an entry at a URL fetches them
    into this machine's shard cache (`glyphforge.cache.remote.files.UrlFiles`), plugged in from above.
    """

    def where(self, entry: Entry) -> str:
        """Where ``entry`` lies, for messages: its folder, or its URL."""

    def file(self, entry: Entry, name: str) -> Path:
        """Return a local path of ``entry``'s data file ``name`` (a KeyError naming the files when it lists none)."""


class InFolder:
    """The data files of an entry on disk: in its folder, checked where they are (see `Entry.file`)."""

    def __repr__(self) -> str:
        return "IN_FOLDER"

    def where(self, entry: Entry) -> str:
        """The entry's folder."""
        return str(entry.path)

    def file(self, entry: Entry, name: str) -> Path:
        """Return ``entry.path / name`` once checked; the errors are `Entry.file`'s."""
        if name not in entry.manifest["files"]:
            raise KeyError(f"entry {entry.kind}/{entry.key[:12]} has no file {name!r}; files: {entry.files}")
        path = entry.path / name
        fix = ("run `glyphforge cache gc` to remove the broken entry, then make it again: "
               f"`prepare-data {entry.kind}`, or for a built dataset the build that made it")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise MissingEntryFileError(
                errno.ENOENT, f"{path} is missing from the {entry.kind} entry {entry.key[:12]} (it was deleted or the "
                f"disk lost it): {fix}", str(path)) from None
        expected = entry.manifest["files"][name]["size"]
        if size != expected:
            raise DamagedEntryFileError(
                f"{path} is damaged: {size:,} bytes where the {entry.kind} entry {entry.key[:12]}'s manifest records "
                f"{expected:,} (truncated or replaced): {fix}", path, size, expected)
        if not os.access(path, os.R_OK):
            raise UnreadableEntryError(
                errno.EACCES, f"{path}, a data file of the {entry.kind} entry {entry.key[:12]}, exists but you may not "
                f"read it: {unreadable_text(path, opened_by=entry.path)}", str(path))
        return path


#: The data files of an entry on disk (the default of `Entry.data_files`).
IN_FOLDER = InFolder()


@dataclass(frozen=True)
class Entry(ManifestFields):
    """A complete cache entry (``key``, ``kind``, ``params``, ``meta``, ``files``, ``size_bytes``: its manifest's),
    on disk or at a URL (``where``).

    Attributes
    ----------
    path
        The entry directory on this machine (for an entry at a URL, its folder in the local shard cache, made when
        a file is first fetched there).
    manifest
        The parsed ``manifest.json``, checked by :func:`read_manifest`.
    data_files
        How its data files are reached (`DataFiles`): in ``path`` for an entry on disk (`IN_FOLDER`).
    """

    path: Path
    manifest: dict[str, Any]
    data_files: DataFiles = field(default=IN_FOLDER, compare=False, repr=False)

    @property
    def where(self) -> str:
        """Where the entry lies, for messages: its folder, or its URL."""
        return self.data_files.where(self)

    def file(self, name: str) -> Path:
        """Return a local path of the data file ``name`` (for an entry at a URL, its copy fetched whole).

        Raises
        ------
        KeyError
            When the manifest lists no such file (the message lists the files).
        MissingEntryFileError
            When the manifest lists it but it is not on disk.
        DamagedEntryFileError
            When it is not the size the manifest records (truncated, or replaced).
        UnreadableEntryError
            When this user may not read it (another member of a shared data dir made it owner-only).

        The messages say what to do: make the entry again, or have its owner open it to the group.
        An entry at a URL raises its `DataFiles`' errors instead (see `glyphforge.cache.remote.files`).
        """
        return self.data_files.file(self, name)

    def read_lock(self) -> ReadLock:
        """Return the entry's readers lock (not yet taken): hold it while using the entry, so it is not evicted."""
        return ReadLock(readers_path(self.path))

    def load(self, name: str, trusted: bool = False) -> Any:
        """Load the pickle in data file ``name`` (safe unpickler unless ``trusted``); see :meth:`file` for errors.

        The entry's read lock is held while it loads.
        """
        with self.read_lock():
            return load_pklz(self.file(name), trusted=trusted)

    def iter(self, name: str, trusted: bool = False) -> Iterator[Any]:
        """Yield every pickle of the multi-member data file ``name``, in order; see :meth:`file` for errors.

        The entry's read lock is held until the iterator is exhausted or closed.
        """
        return _locked_iter(self.read_lock(), iter_pklz(self.file(name), trusted=trusted))

    @property
    def last_used(self) -> float:
        """When a reader last took the entry's lock, else when it was made (seconds since the epoch)."""
        made = _mtime(self.path / MANIFEST)
        used = _mtime(readers_path(self.path))
        return max(made, used)


def _locked_iter(lock: ReadLock, items: Iterator[Any]) -> Iterator[Any]:
    with lock:
        yield from items


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def read_entry(path: Path) -> Entry | None:
    """Return the complete entry in directory ``path``, or None (also when its manifest fails `read_manifest`).

    Raises
    ------
    UnreadableEntryError
        When this user may not read it (see the module docstring).
    """
    try:
        return Entry(path, read_manifest(path))
    except DamagedManifestError:
        return None
    except PermissionError:
        closed = next((folder for folder in (*reversed(path.parents), path) if not os.access(folder, os.X_OK)), path)
        message = (f"the {path.parent.name} entry {path.name[:12]} at {path} exists, but you may not read "
                   f"{'it' if closed == path else closed}: {unreadable_text(closed)}")
        raise UnreadableEntryError(errno.EACCES, message, str(path)) from None
