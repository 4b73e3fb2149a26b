"""The content-addressed cache store: atomic entries with manifests.

Layout under the root::

    <root>/<kind>/<key>/manifest.json     a complete entry (manifest written last)
    <root>/<kind>/<key>/<name>.pklz       its data files
    <root>/<kind>/.tmp-<key>-<random>/    a writer's staging directory
    <root>/<kind>/.<key>.lock             the per-key lock (filelock)
    <root>/<kind>/.<key>.lock.holder      who holds it (pid, host, since): see glyphforge.cache.locks
    <root>/<kind>/.<key>.readers          readers' shared lock; its mtime is the entry's last use
    <root>/<kind>/<key>.work/             persistent scratch for resumable work
    <root>/<kind>/<key>.decoded/          a built dataset's decoded copy (glyphforge.builds.materialize)
    <root>/<kind>/.tmp-<key>.decoded-<random>/  its staging, under the lock .<key>.decoded.lock

An entry is staged in a sibling temporary directory and renamed into place only
when complete, so readers never see a partial entry and a crash leaves either no
entry or a whole one. Staging directories left by a dead writer are removed by
the next writer of that key (it holds the key's lock) or by :meth:`CacheStore.gc`.

An entry directory whose manifest fails `glyphforge.cache.manifest.read_manifest` is
broken: :meth:`CacheStore.get` treats it as missing (so it is made again),
:meth:`~CacheStore.ls` skips it, :meth:`~CacheStore.verify` reports it and
:meth:`~CacheStore.gc` removes it.

Readers hold a shared lock on the entry while they read it (`Entry.load`, `Entry.iter`;
a `glyphforge.builds.BuiltDataset` for as long as it is open), which also records the
entry's last use (see :mod:`glyphforge.cache.locks`). :meth:`CacheStore.evict` (``gc``'s
``max_size``) removes the least recently used entries until the store's data files fit
a size, and never one whose lock it cannot take at once: some process is reading it.
An entry never read since it was made was last used when it was made (its manifest's
modification time).

An entry's companions, its ``.work`` scratch and its ``.decoded`` copy, go with it:
:meth:`~CacheStore.rm` and :meth:`~CacheStore.evict` remove them, eviction counts the
decoded copy's bytes with the entry's, replacing an entry drops its decoded copy, and
:meth:`~CacheStore.gc` removes a decoded copy whose entry is gone.

An entry (or a folder) this user may not read is not broken: another user of a shared
data dir made it owner-only. :meth:`~CacheStore.get` raises `UnreadableEntryError`
(never makes it again over theirs), :meth:`~CacheStore.unreadable` and
:meth:`~CacheStore.verify` name it, and :meth:`~CacheStore.gc` leaves it alone.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from glyphforge import config
from glyphforge._access import check_data_dir_access
from glyphforge._checks import PathLike
from glyphforge._files import describe_owner, make_temp_dir, remove_tree, sha256_file, writing
from glyphforge.cache.decoded import verify_copy
from glyphforge.cache.keys import cache_key, check_kind
from glyphforge.cache.locks import LockTimeoutError, ReadLock, exclusive, hold, readers_path
from glyphforge.cache.manifest import (
    MANIFEST,
    BrokenManifestError,
    ManifestFields,
    check_file_name,
    make_manifest,
    read_manifest,
)
from glyphforge.cache.pklz import CorruptPklzError, dump_pklz, iter_pklz, load_pklz
from glyphforge.errors import AccessError, IntegrityError, StorageError
from glyphforge.textfmt import parse_size

_STAGING_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_WORK_SUFFIX = ".work"
#: The suffix of an entry's decoded copy, ``<root>/<kind>/<key>.decoded`` (see `decoded_dir`).
DECODED_SUFFIX = ".decoded"
_UNREADABLE = "you may not read it: "
_COMPANIONS = (_WORK_SUFFIX, DECODED_SUFFIX)


class MissingEntryFileError(IntegrityError, FileNotFoundError):
    """A data file an entry's manifest lists is not on disk; the message names it and how to make the entry again.

    ``errno`` is ``ENOENT`` and ``filename`` the missing file.
    """

    def __str__(self) -> str:
        return str(self.strerror)


class DamagedEntryFileError(CorruptPklzError):
    """A data file of an entry is not the size its manifest records; the message names it and the fix.

    ``path`` is the file, ``size`` its size in bytes and ``expected`` the size its manifest records.
    """

    def __init__(self, message: str, path: Path, size: int, expected: int) -> None:
        super().__init__(message)
        self.path, self.size, self.expected = path, size, expected

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.path, self.size, self.expected)


class UnreadableEntryError(AccessError, PermissionError):
    """An entry exists but this user may not read it (another user's, made owner-only); the message says what to do.

    It is not broken: glyphforge neither makes it again nor removes it. ``errno`` is
    ``EACCES`` and ``filename`` the entry directory, or the data file this user may not read.
    """

    def __str__(self) -> str:
        return str(self.strerror)


class CleanupError(StorageError):
    """:meth:`CacheStore.gc` removed what it could but not everything it should; the message names each and why.

    Attributes
    ----------
    removed
        What it did remove.
    """

    def __init__(self, message: str, removed: list[Path]) -> None:
        super().__init__(message)
        self.errno = errno.EACCES
        self.removed = removed


def _unreadable_text(path: Path, opened_by: Path | None = None) -> str:
    """Why this user may not read ``path`` (an entry, a folder or a file of the store), and what to do.

    ``opened_by``: what its owner should open to the group (default ``path``), e.g. a file's entry.
    """
    return (f"permission is denied ({describe_owner(path)}). Another user made it "
            "readable by its owner only (with a umask of 077, or with an older glyphforge, which made every entry "
            f"so); it is not broken and glyphforge leaves it alone. Ask its owner to run "
            f"`chmod -R g+rX {opened_by or path}` "
            "(and to work with `umask 002` in a data dir a group shares), or use a data dir of your own "
            "(--data-dir or $GLYPHFORGE_DATA_DIR)")


@dataclass(frozen=True)
class Entry(ManifestFields):
    """A complete cache entry (``key``, ``kind``, ``params``, ``meta``, ``files``, ``size_bytes``: its manifest's).

    Attributes
    ----------
    path
        The entry directory.
    manifest
        The parsed ``manifest.json``, checked by :func:`read_manifest`.
    """

    path: Path
    manifest: dict[str, Any]

    def file(self, name: str) -> Path:
        """Return the path of the data file ``name``.

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
        """
        if name not in self.manifest["files"]:
            raise KeyError(f"entry {self.kind}/{self.key[:12]} has no file {name!r}; files: {self.files}")
        path = self.path / name
        fix = (f"run `glyphforge cache gc` to remove the broken entry, then make it again: `prepare-data {self.kind}`, "
               "or for a built dataset the build that made it")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise MissingEntryFileError(
                errno.ENOENT, f"{path} is missing from the {self.kind} entry {self.key[:12]} (it was deleted or the "
                f"disk lost it): {fix}", str(path)) from None
        expected = self.manifest["files"][name]["size"]
        if size != expected:
            raise DamagedEntryFileError(
                f"{path} is damaged: {size:,} bytes where the {self.kind} entry {self.key[:12]}'s manifest records "
                f"{expected:,} (truncated or replaced): {fix}", path, size, expected)
        if not os.access(path, os.R_OK):
            raise UnreadableEntryError(
                errno.EACCES, f"{path}, a data file of the {self.kind} entry {self.key[:12]}, exists but you may not "
                f"read it: {_unreadable_text(path, opened_by=self.path)}", str(path))
        return path

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
    def decoded_bytes(self) -> int:
        """The bytes of the entry's decoded copy (`decoded_dir`); 0 when it has none, or a link (not glyphforge's)."""
        copy = decoded_dir(self.path)
        return 0 if copy.is_symlink() else sum(path.stat().st_size for path in _listing(copy) if path.is_file())

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


def decoded_dir(entry_dir: Path) -> Path:
    """Return where the decoded copy of the entry in ``entry_dir`` lives: ``<root>/<kind>/<key>.decoded``."""
    return entry_dir.with_name(f"{entry_dir.name}{DECODED_SUFFIX}")


def decoded_staging_prefix(entry_dir: Path) -> str:
    """The name prefix of a staging directory of that decoded copy: the store's staging of key ``<key>.decoded``.

    So `CacheStore.gc` removes an abandoned one under the lock ``.<key>.decoded.lock``, which its maker holds.
    """
    return f"{_STAGING_PREFIX}{entry_dir.name}{DECODED_SUFFIX}-"


def read_entry(path: Path) -> Entry | None:
    """Return the complete entry in directory ``path``, or None (also when its manifest fails `read_manifest`).

    Raises
    ------
    UnreadableEntryError
        When this user may not read it (see the module docstring).
    """
    try:
        return Entry(path, read_manifest(path))
    except BrokenManifestError:
        return None
    except PermissionError:
        closed = next((folder for folder in (*reversed(path.parents), path) if not os.access(folder, os.X_OK)), path)
        message = (f"the {path.parent.name} entry {path.name[:12]} at {path} exists, but you may not read "
                   f"{'it' if closed == path else closed}: {_unreadable_text(closed)}")
        raise UnreadableEntryError(errno.EACCES, message, str(path)) from None


@dataclass(frozen=True)
class CacheProblem:
    """One thing :meth:`CacheStore.verify` found wrong; ``unreadable``: this user may not read it (not known broken)."""

    path: Path
    message: str
    unreadable: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Eviction:
    """What :meth:`CacheStore.evict` did.

    Attributes
    ----------
    limit
        The size asked for, in bytes.
    size_before, size_after
        The store's data files before and after, in bytes (`Entry.size_bytes` and `Entry.decoded_bytes` summed).
    evicted
        The entries removed, least recently used first.
    in_use
        Entries it would have removed but left: a process was reading them.
    """

    limit: int
    size_before: int
    size_after: int
    evicted: tuple[Entry, ...]
    in_use: tuple[Entry, ...]

    @property
    def fits(self) -> bool:
        """Whether the store fits the limit now."""
        return self.size_after <= self.limit


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
        """Write ``obj`` as the gzipped pickle ``name`` (see :func:`dump_pklz`)."""
        return dump_pklz(obj, self.path / check_file_name(name), level=level)

    def add_file(self, name: str, source: PathLike) -> Path:
        """Move an already written file into the entry as ``name``."""
        destination = self.path / check_file_name(name)
        with writing(destination):
            shutil.move(os.fspath(source), destination)
        return destination


class CacheStore:
    """A content-addressed store of gzipped pickles.

    Parameters
    ----------
    root
        The store's directory (default: ``<data dir>/cache``, see :mod:`glyphforge.config`).
    lock_timeout
        Seconds to wait for an entry another process is making before giving up with
        `LockTimeoutError` (default: ``$GLYPHFORGE_LOCK_TIMEOUT``, else an hour; ``inf``:
        for ever). While waiting, who holds the lock is logged every ten seconds.
    """

    def __init__(self, root: PathLike | None = None, *, lock_timeout: float | None = None) -> None:
        self.root = Path(root) if root is not None else config.cache_dir()
        self.lock_timeout = config.lock_timeout(lock_timeout)
        self._locks: dict[Path, filelock.FileLock] = {}
        self._locks_guard = threading.Lock()

    @classmethod
    def for_data_dir(cls, data_dir: PathLike | None = None, *, lock_timeout: float | None = None) -> CacheStore:
        """The store under ``<data dir>/cache`` (``lock_timeout``: the constructor's); `check_data_dir_access` first."""
        check_data_dir_access(config.data_dir(data_dir))
        return cls(config.cache_dir(data_dir), lock_timeout=lock_timeout)

    def __repr__(self) -> str:
        return f"CacheStore({str(self.root)!r})"

    @property
    def where(self) -> str:
        """Where entries are looked for, for messages ("X is not prepared in ..."): the store's directory."""
        return str(self.root)

    # -- addressing -------------------------------------------------------
    def key(self, kind: str, params: Mapping[str, Any]) -> str:
        """Return the hex sha256 key of ``(kind, params, format version)``."""
        return cache_key(kind, params)

    def _entry_dir(self, kind: str, key: str) -> Path:
        return self.root / check_kind(kind) / key

    def work_dir(self, kind: str, params: Mapping[str, Any]) -> Path:
        """Return (and create) a persistent scratch directory for the key's resumable work."""
        path = self.root / check_kind(kind) / f"{self.key(kind, params)}{_WORK_SUFFIX}"
        with writing(path):
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _lock(self, kind: str, key: str) -> filelock.FileLock:
        path = self.root / kind / f".{key}.lock"
        with self._locks_guard:
            if path not in self._locks:
                with writing(path):
                    path.parent.mkdir(parents=True, exist_ok=True)
                self._locks[path] = filelock.FileLock(path)
            return self._locks[path]

    def _locked(self, kind: str, key: str, timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the key's lock, waiting for another holder at most ``timeout`` (default ``lock_timeout``) seconds."""
        timeout = self.lock_timeout if timeout is None else timeout
        return hold(self._lock(kind, key), f"preparing {kind} {key[:12]}", timeout)

    # -- reading ----------------------------------------------------------
    def get(self, kind: str, params: Mapping[str, Any]) -> Entry | None:
        """Return the complete entry for ``(kind, params)``, or None (also for a broken entry: see `read_manifest`).

        Raises `UnreadableEntryError` when the entry is there but this user may not read it.
        """
        return read_entry(self._entry_dir(kind, self.key(kind, params)))

    # -- writing ----------------------------------------------------------
    @contextmanager
    def create(self, kind: str, params: Mapping[str, Any]) -> Iterator[Writer]:
        """Stage a new entry; commit it atomically on a clean exit.

        The key's lock is held throughout (waiting for another process at most
        ``lock_timeout`` seconds: `LockTimeoutError`). On an exception the staging
        directory is removed and nothing becomes visible. An existing entry for the
        same key is replaced atomically. A full, read-only or forbidden disk raises
        `glyphforge._files.StorageError` naming the path.
        """
        key = self.key(kind, params)
        with self._locked(kind, key):
            self._remove_stale_staging(kind, key)
            with writing(self.root / kind):
                staging = make_temp_dir(f"{_STAGING_PREFIX}{key}-", self.root / kind)
            writer = Writer(staging)
            try:
                yield writer
                self._commit(kind, key, params, writer)
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    def get_or_create(
        self, kind: str, params: Mapping[str, Any], fill: Callable[[Writer], None]
    ) -> Entry:
        """Return the entry, calling ``fill(writer)`` to make it only if it is missing.

        Concurrent callers (threads or processes) make it once; the others wait
        for the lock (logging who holds it, at most ``lock_timeout`` seconds:
        `LockTimeoutError`) and then read the committed entry. A broken entry is
        made again.
        """
        entry = self.get(kind, params)
        if entry is not None:
            return entry
        with self._locked(kind, self.key(kind, params)):
            entry = self.get(kind, params)
            if entry is None:
                with self.create(kind, params) as writer:
                    fill(writer)
                entry = self.get(kind, params)
        assert entry is not None, "a committed entry must be readable"
        return entry

    def _commit(self, kind: str, key: str, params: Mapping[str, Any], writer: Writer) -> None:
        files = {}
        for path in sorted(writer.path.iterdir()):
            if path.name.startswith(".") or not path.is_file():
                continue
            known = writer.known_sha256.get(path.name)
            files[path.name] = {"size": path.stat().st_size, "sha256": known or sha256_file(path)}
        manifest = make_manifest(kind, key, params, files, writer.meta) if writer.manifest is None else writer.manifest
        if (manifest["kind"], manifest["key"], manifest["files"]) != (kind, key, files):
            raise ValueError(f"the manifest given for {kind} {key[:12]} is not that of the staged files (it names "
                             f"{manifest['kind']} {manifest['key'][:12]} with files {sorted(manifest['files'])}, the "
                             f"staging holds {sorted(files)}): nothing was committed")
        # A plain write, not _files.atomic_path: the staging directory is invisible until the rename below.
        with writing(writer.path / MANIFEST):
            (writer.path / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        final = self._entry_dir(kind, key)
        with writing(final):
            replaced = self._hide(final) if final.exists() else None
            os.rename(writer.path, final)  # right after hiding: the key is without an entry only between two renames
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)
            shutil.rmtree(decoded_dir(final), ignore_errors=True)  # the replaced entry's
        with ReadLock(readers_path(final)):  # made by the writer (its umask, as the key's lock), and used now
            pass

    def _hide(self, path: Path) -> Path:
        """Move ``path`` out of sight atomically; return the trash directory now holding it.

        Raises `StorageError` (and leaves no trash directory) when this user may not move it.
        """
        with writing(path):
            trash = make_temp_dir(f"{_TRASH_PREFIX}{path.name}-", path.parent)
            try:
                os.rename(path, trash / path.name)
            except OSError:
                trash.rmdir()
                raise
        return trash

    def _discard(self, path: Path) -> None:
        """Move ``path`` out of sight atomically, then delete it."""
        shutil.rmtree(self._hide(path), ignore_errors=True)

    def discard_in_background(self, path: Path) -> threading.Thread | None:
        """Move ``path`` (a directory in the store) out of sight at once; delete it on a background thread.

        For directories of many files (a build's 20,000 finished shards take seconds to
        unlink) whose deletion nobody needs to wait for. The thread is not a daemon: the
        interpreter finishes it before exiting; a process killed before that leaves a
        trash directory that `gc` removes. Returns the thread (None when ``path`` is gone).
        """
        if not path.exists():
            return None
        trash = self._hide(path)
        thread = threading.Thread(target=shutil.rmtree, args=(trash,), kwargs={"ignore_errors": True},
                                  name=f"glyphforge-discard-{path.name}")
        thread.start()
        return thread

    def _remove_stale_staging(self, kind: str, key: str) -> None:
        for leftover in (self.root / kind).glob(f"{_STAGING_PREFIX}{key}-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    # -- maintenance ------------------------------------------------------
    def _kind_dirs(self) -> list[Path]:
        return [path for path in _listing(self.root) if path.is_dir() and not path.name.startswith(".")]

    def _entry_dirs(self) -> Iterator[Path]:
        for kind_dir in self._kind_dirs():
            for path in _listing(kind_dir):
                if path.is_dir() and not path.name.startswith(".") and not path.name.endswith(_COMPANIONS):
                    yield path

    def unreadable(self) -> list[CacheProblem]:
        """Name every folder and entry of the store this user may not read, and what to do (see the module docstring).

        `ls` skips them and `gc` leaves them alone; each problem's ``unreadable`` is True.
        """
        folders = [self.root, *self._kind_dirs()] if self.root.is_dir() else []
        problems = [CacheProblem(folder, _UNREADABLE + _unreadable_text(folder), unreadable=True)
                    for folder in folders if not _listable(folder)]
        for path in self._entry_dirs():
            try:
                read_entry(path)
            except UnreadableEntryError:
                problems.append(CacheProblem(path, _UNREADABLE + _unreadable_text(path), unreadable=True))
        return problems

    def ls(self) -> list[Entry]:
        """Return every complete entry, by kind then creation time.

        Broken entries are skipped (see `verify`), and so are those this user may not read (see `unreadable`).
        """
        entries = [entry for path in self._entry_dirs() if (entry := _readable_entry(path))]
        return sorted(entries, key=lambda entry: (entry.kind, entry.manifest.get("created", "")))

    def find(self, key: str) -> Entry:
        """Return the entry whose key is ``key`` or starts with it (at least 6 characters)."""
        if len(key) < 6:
            raise KeyError(f"cache key {key!r} is too short: give at least 6 characters of it")
        matches = [entry for entry in self.ls() if entry.key.startswith(key)]
        if len(matches) != 1:
            found = "no entry" if not matches else f"{len(matches)} entries"
            raise KeyError(f"{found} in {self.root} with a key starting {key!r}; see `glyphforge cache ls` (a broken "
                           "entry is not listed: `glyphforge cache verify` names it, `glyphforge cache gc` removes it)")
        return matches[0]

    def rm(self, key: str) -> Entry:
        """Remove the entry ``key`` (or unique key prefix) and its scratch directory."""
        entry = self.find(key)
        with self._locked(entry.kind, entry.key):
            self._discard(entry.path)
            _remove_companions(entry.path)
        return entry

    def verify(self) -> list[CacheProblem]:
        """Check every manifest (`read_manifest`) and re-hash every data file against it, and every decoded copy's.

        Returns what is wrong, empty when all is good: a broken manifest is one problem
        naming ``manifest.json`` and what is wrong with it. What this user may not read is
        a problem too, with ``unreadable`` True: it could not be checked.
        """
        problems = self.unreadable()
        for path in self._entry_dirs():
            try:
                entry = Entry(path, read_manifest(path))
            except BrokenManifestError as error:
                problems.append(CacheProblem(path / MANIFEST, str(error)))
                continue
            except PermissionError:
                continue  # named by unreadable()
            problems.extend(_check_entry_files(entry, rehash=True))
            problems.extend(CacheProblem(*problem) for problem in verify_copy(decoded_dir(path), entry.key))
        return problems

    def evict(self, max_size: int | str) -> Eviction:
        """Remove the least recently used entries until the store's data files fit ``max_size``; never one in use.

        Parameters
        ----------
        max_size
            Bytes, or a size such as ``"20GB"``, ``"500MB"``, ``"1.5TiB"`` (see `glyphforge.textfmt.parse_size`).

        Returns
        -------
        Eviction
            What was removed, what was left because a process was reading it, and the sizes.

        Raises
        ------
        ValueError
            When ``max_size`` is not a size.
        CleanupError
            After evicting all it could, when an entry it should evict is another user's that this
            one may not delete; the message names each, its owner and what to do.
        OSError
            Where there are no POSIX file locks (see :mod:`glyphforge.cache.locks`).
        """
        limit = parse_size(max_size)
        entries = sorted(self.ls(), key=lambda entry: entry.last_used)
        sizes = {entry.path: entry.size_bytes + entry.decoded_bytes for entry in entries}
        size = before = sum(sizes.values())
        evicted, in_use, failed = [], [], []
        for entry in entries:
            if size <= limit:
                break
            try:
                taken = self._evict(entry)
            except OSError as error:  # another user's entry this one may not delete
                failed.append(_failure(entry.path, error))
                continue
            if taken:
                evicted.append(entry)
                size -= sizes[entry.path]
            else:
                in_use.append(entry)
        if failed:
            raise CleanupError(
                f"`glyphforge cache gc --max-size` evicted {len(evicted)} entries but could not remove "
                f"{len(failed)}: " + "; ".join(failed) + ". Where they are another user's, ask their owner to "
                "remove them (`glyphforge cache rm KEY`), or to let the group write their files (`chmod -R g+rwX` "
                "on them, and `umask 002` from then on).", [entry.path for entry in evicted])
        return Eviction(limit, before, size, tuple(evicted), tuple(in_use))

    def _evict(self, entry: Entry) -> bool:
        """Remove ``entry`` unless a writer holds its key or a reader its read lock; whether it was removed."""
        try:
            with self._locked(entry.kind, entry.key, timeout=0), exclusive(readers_path(entry.path)) as taken:
                if taken:
                    self._discard(entry.path)
                    _remove_companions(entry.path)
                return taken
        except LockTimeoutError:
            return False

    def gc(self, max_size: int | str | None = None) -> list[Path]:
        """Remove abandoned staging and trash directories, broken entries and decoded copies whose entry is gone;
        with ``max_size``, then `evict`.

        A broken entry has a manifest that fails `read_manifest`, or a data file that
        is missing or of the wrong size. An entry this user may not read is not broken:
        it is left alone (`unreadable` names it). Returns the removed paths (the evicted
        entries' directories last, least recently used first).

        Raises
        ------
        CleanupError
            After removing all it could, when something it should remove is another user's
            that this one may not delete; the message names each, its owner and what to do.
        """
        removed: list[Path] = []
        failed: list[str] = []
        for kind_dir in self._kind_dirs():
            for path in _listing(kind_dir):
                if path.name.startswith(_TRASH_PREFIX):
                    self._collect(path, remove_tree, removed, failed)
                elif path.name.startswith(_STAGING_PREFIX):
                    self._collect(path, self._remove_staging, removed, failed)
        for path in list(self._entry_dirs()):
            try:
                entry = read_entry(path)
            except UnreadableEntryError:
                continue  # not known to be broken: another user's (`unreadable` names it)
            if entry is None or _check_entry_files(entry, rehash=False):
                self._collect(path, lambda broken: remove_tree(self._hide(broken)), removed, failed)
        for kind_dir in self._kind_dirs():  # decoded copies of entries gone (removed above, or by hand)
            for path in _listing(kind_dir):
                if path.name.endswith(DECODED_SUFFIX) and not (kind_dir / path.name[:-len(DECODED_SUFFIX)]).exists():
                    self._collect(path, remove_tree, removed, failed)
        if failed:
            raise CleanupError(
                f"`glyphforge cache gc` removed {len(removed)} item(s) but could not remove {len(failed)}: "
                + "; ".join(failed) + ". Where they are another user's, ask their owner to run `glyphforge cache gc`, "
                "or to let the group write their files (`chmod -R g+rwX` on them, and `umask 002` from then on).",
                removed)
        if max_size is not None:
            removed.extend(entry.path for entry in self.evict(max_size).evicted)
        return removed

    @staticmethod
    def _collect(path: Path, remove: Callable[[Path], OSError | None], removed: list[Path], failed: list[str]) -> None:
        """Run ``remove(path)``; add ``path`` to ``removed``, or what stopped it to ``failed``.

        A `LockTimeoutError` is no failure: a live writer holds the key, the path is its own.
        """
        try:
            error = remove(path)
        except LockTimeoutError:
            return
        except OSError as raised:
            error = raised
        if error is None:
            removed.append(path)
        else:
            failed.append(_failure(path, error))

    def _remove_staging(self, path: Path) -> OSError | None:
        """Delete an abandoned staging directory (`remove_tree`), holding its key's lock (none: `LockTimeoutError`)."""
        key = path.name[len(_STAGING_PREFIX):].rsplit("-", 1)[0]
        with self._locked(path.parent.name, key, timeout=0):
            return remove_tree(path)


def _remove_companions(entry_dir: Path) -> None:
    """Delete the scratch directory and the decoded copy of the entry that was in ``entry_dir``."""
    for suffix in _COMPANIONS:
        shutil.rmtree(entry_dir.with_name(f"{entry_dir.name}{suffix}"), ignore_errors=True)


def _failure(path: Path, error: OSError) -> str:
    """Why ``path`` could not be removed, for `CleanupError`: the error, where, and whose that is."""
    where = error.filename or path
    why = os.strerror(error.errno) if error.errno else str(error)
    return f"{path} ({why} at {where}: {describe_owner(where)})"


def _listing(folder: Path) -> list[Path]:
    """The sorted contents of ``folder``; empty when it is missing or this user may not list it (`unreadable`)."""
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def _listable(folder: Path) -> bool:
    try:
        with os.scandir(folder):
            return True
    except PermissionError:
        return False


def _readable_entry(path: Path) -> Entry | None:
    """`read_entry`, but None also for an entry this user may not read (`unreadable` names those)."""
    try:
        return read_entry(path)
    except UnreadableEntryError:
        return None


def _check_entry_files(entry: Entry, rehash: bool) -> list[CacheProblem]:
    problems = []
    for name, info in sorted(entry.manifest["files"].items()):
        path = entry.path / name
        if not path.is_file():
            problems.append(CacheProblem(path, "missing (deleted, or the disk lost it)"))
        elif path.stat().st_size != info["size"]:
            problems.append(
                CacheProblem(path, f"size {path.stat().st_size} bytes, manifest says {info['size']} (truncated?)")
            )
        elif rehash:
            try:
                digest = sha256_file(path)
            except PermissionError:
                problems.append(CacheProblem(path, _UNREADABLE + _unreadable_text(path), unreadable=True))
                continue
            if digest != info["sha256"]:
                problems.append(CacheProblem(path, "sha256 differs from the manifest (corrupted)"))
    return problems
