"""The content-addressed cache store: atomic entries with manifests.

Layout under the root::

    <root>/<kind>/<key>/manifest.json     a complete entry (manifest written last)
    <root>/<kind>/<key>/<name>.pklz       its data files
    <root>/<kind>/.tmp-<key>-<random>/    a writer's staging directory
    <root>/<kind>/.<key>.lock             the per-key lock (filelock)
    <root>/<kind>/.<key>.lock.holder      who holds it (pid, host, since): see glyphforge.cache.locks
    <root>/<kind>/.<key>.readers          readers' shared lock; its mtime is the entry's last use
    <root>/<kind>/<key>.work/             persistent scratch for resumable work
    <root>/<kind>/<key>.<label>/          a companion made from the entry (e.g. <key>.decoded, a built
                                          dataset's decoded copy; see glyphforge.cache.companions)
    <root>/<kind>/.tmp-<key>.<label>-<random>/  its staging, under the lock .<key>.<label>.lock

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

An entry's companions, the folders ``<key>.<label>`` beside it (its ``.work`` scratch, and
copies a layer above makes from its files, each with a record of its files: a built
dataset's ``.decoded`` copy), go with it (:mod:`glyphforge.cache.companions`):
:meth:`~CacheStore.rm` and :meth:`~CacheStore.evict` remove them, eviction counts a derived
companion's bytes with the entry's, replacing an entry drops its derived companions,
:meth:`~CacheStore.verify` re-hashes them against their records and :meth:`~CacheStore.gc`
removes a derived companion whose entry is gone or that fails its record.

A store may have a source (`EntrySource`) of the entries it lacks: the local copy of a data dir
at a URL has the data dir there (`glyphforge.cache.remote.pull_through.PullThrough`), whose prepared
entries :meth:`~CacheStore.get` fetches on a miss and commits here like any other.

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
from pathlib import Path
from typing import Any, Protocol

import filelock

from glyphforge import config
from glyphforge._access import check_data_dir_access
from glyphforge._checks import PathLike
from glyphforge._files import make_temp_dir, remove_tree, sha256_file, writing
from glyphforge.cache.cleanup import sweep
from glyphforge.cache.companions import companion_sizes, remove_companions, work_of
from glyphforge.cache.entry import Entry, UnreadableEntryError, read_entry, unreadable_text
from glyphforge.cache.eviction import Eviction, evict_entries
from glyphforge.cache.keys import cache_key, check_kind
from glyphforge.cache.layout import STAGING_PREFIX, TRASH_PREFIX
from glyphforge.cache.locks import LockTimeoutError, ReadLock, exclusive, hold, readers_path
from glyphforge.cache.lookup import split_target
from glyphforge.cache.manifest import MANIFEST, make_manifest
from glyphforge.cache.problems import CacheProblem, Scan
from glyphforge.cache.verify import check_store, read_store, scan_store
from glyphforge.cache.writer import Writer
from glyphforge.textfmt import parse_size


class EntrySource(Protocol):
    """Where a `CacheStore` fetches the entries it lacks (`glyphforge.cache.remote.pull_through.PullThrough`)."""

    def fetch(self, store: CacheStore, kind: str, params: Mapping[str, Any]) -> Entry | None:
        """Put the entry ``(kind, params)`` into ``store`` (`CacheStore.make`) and return it; None if it has none."""

    def where(self, root: Path) -> str:
        """Where entries are looked for, for messages, the store's copy being at ``root``."""


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
    source
        Where entries missing here are fetched from (`EntrySource`; default: nowhere).
    """

    def __init__(self, root: PathLike | None = None, *, lock_timeout: float | None = None,
                 source: EntrySource | None = None) -> None:
        self.root = Path(root) if root is not None else config.cache_dir()
        self.lock_timeout = config.lock_timeout(lock_timeout)
        self.source = source
        self._locks: dict[Path, filelock.FileLock] = {}
        self._locks_guard = threading.Lock()

    @classmethod
    def for_data_dir(cls, data_dir: PathLike | None = None, *, lock_timeout: float | None = None) -> CacheStore:
        """The store under ``<data dir>/cache`` (``lock_timeout``: the constructor's); `check_data_dir_access` first."""
        root = config.cache_dir(data_dir)  # <data dir>/cache, the data dir resolved once
        check_data_dir_access(root.parent)
        return cls(root, lock_timeout=lock_timeout)

    def __repr__(self) -> str:
        source = "" if self.source is None else f", source={self.source!r}"
        return f"CacheStore({str(self.root)!r}{source})"

    @property
    def where(self) -> str:
        """Where entries are looked for, for messages ("X is not prepared in ..."): the store's directory
        (and its source's place)."""
        return str(self.root) if self.source is None else self.source.where(self.root)

    # -- addressing -------------------------------------------------------
    def key(self, kind: str, params: Mapping[str, Any]) -> str:
        """Return the hex sha256 key of ``(kind, params, format version)``."""
        return cache_key(kind, params)

    def _entry_dir(self, kind: str, key: str) -> Path:
        return self.root / check_kind(kind) / key

    def work_dir(self, kind: str, params: Mapping[str, Any]) -> Path:
        """Return (and create) a persistent scratch directory for the key's resumable work."""
        path = work_of(self.root / check_kind(kind) / self.key(kind, params))
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

        An entry missing here is fetched from the store's `source`, if it has one and the source has it.
        Raises `UnreadableEntryError` when the entry is there but this user may not read it (and what
        the source raises).
        """
        entry = read_entry(self._entry_dir(kind, self.key(kind, params)))
        if entry is None and self.source is not None:
            entry = self.source.fetch(self, kind, params)
        return entry

    # -- writing ----------------------------------------------------------
    @contextmanager
    def create(self, kind: str, params: Mapping[str, Any]) -> Iterator[Writer]:
        """Stage a new entry; commit it atomically on a clean exit.

        The key's lock is held throughout (waiting for another process at most
        ``lock_timeout`` seconds: `LockTimeoutError`). On an exception the staging
        directory is removed and nothing becomes visible. An existing entry for the
        same key is replaced atomically. A full, read-only or forbidden disk raises
        `glyphforge.errors.StorageError` naming the path.
        """
        key = self.key(kind, params)
        with self._locked(kind, key):
            self._remove_stale_staging(kind, key)
            with writing(self.root / kind):
                staging = make_temp_dir(f"{STAGING_PREFIX}{key}-", self.root / kind)
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
        return entry if entry is not None else self.make(kind, params, fill)

    def make(self, kind: str, params: Mapping[str, Any], fill: Callable[[Writer], None]) -> Entry:
        """Make the entry with ``fill(writer)`` under the key's lock, unless it is here by then (another process
        made it meanwhile); return it. A broken entry is made again.
        """
        key = self.key(kind, params)
        with self._locked(kind, key):  # (reentrant) held until the entry is read
            with self.making(kind, params) as writer:
                if writer is not None:
                    fill(writer)
            entry = read_entry(self._entry_dir(kind, key))
        assert entry is not None, "a committed entry must be readable"
        return entry

    @contextmanager
    def making(self, kind: str, params: Mapping[str, Any]) -> Iterator[Writer | None]:
        """Hold the key's lock while the block makes the entry: yield None when it is here by then (another process
        made it meanwhile), else a `Writer` whose files are committed on a clean exit (:meth:`create`).

        What :meth:`make` does, for a caller that makes the entry itself rather than handing down a ``fill``.
        """
        key = self.key(kind, params)
        with self._locked(kind, key):
            if read_entry(self._entry_dir(kind, key)) is not None:
                yield None
                return
            with self.create(kind, params) as writer:
                yield writer

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
            remove_companions(final, derived=True)  # made from the replaced entry's files
        with ReadLock(readers_path(final)):  # made by the writer (its umask, as the key's lock), and used now
            pass

    def _hide(self, path: Path) -> Path:
        """Move ``path`` out of sight atomically; return the trash directory now holding it.

        Raises `StorageError` (and leaves no trash directory) when this user may not move it.
        """
        with writing(path):
            trash = make_temp_dir(f"{TRASH_PREFIX}{path.name}-", path.parent)
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
        for leftover in (self.root / kind).glob(f"{STAGING_PREFIX}{key}-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    # -- maintenance (`glyphforge.cache.store_protocol.Store`) --------------
    @property
    def place(self) -> str:
        """Where the store is, for messages: ``in <root>``."""
        return f"in {self.root}"

    @property
    def repair(self) -> str:
        """What to do about the damage `verify` finds: remove it (`gc`), then make it again."""
        return ("`glyphforge cache gc` removes what is damaged (glyphforge's own files only); then prepare or build "
                "again what you need")

    def scan(self) -> Scan:
        """List the store once: its complete entries (`ls`), and what is left out and why (broken manifests, and
        what this user may not read: `unreadable`)."""
        return scan_store(self.root)

    def unreadable(self) -> list[CacheProblem]:
        """Name every folder and entry of the store this user may not read, and what to do (see the module docstring).

        `ls` skips them and `gc` leaves them alone; each problem's ``unreadable`` is True.
        """
        return [problem for problem in self.scan().problems if problem.unreadable]

    def refuse_unreadable(self, target: str) -> None:
        """Raise `UnreadableEntryError` naming the entry and its owner when ``target`` (a kind, ``KIND:newest``, or a
        key prefix of 6+ characters) names an entry, or a kind's folder, this user may not read (see `unreadable`).

        For a lookup that found nothing this user may read: the entry is there, and not "none yet".
        """
        kind = split_target(target)[0]
        for problem in self.unreadable():
            path = Path(problem.path)
            if path.parent.parent == self.root and (path.parent.name == kind
                                                     or (len(target) >= 6 and path.name.startswith(target))):
                read_entry(path)  # raises UnreadableEntryError, naming the entry and whose it is
            elif path == self.root or (path.parent == self.root and path.name == kind):
                what = "the cache" if path == self.root else f"the {kind} entries"
                raise UnreadableEntryError(errno.EACCES, f"{what} in {path} exist, but you may not read them: "
                                           f"{unreadable_text(path)}", str(path))

    def ls(self, kind: str | None = None) -> list[Entry]:
        """Return every complete entry (of ``kind`` only, when given), by kind then creation time.

        Broken entries are skipped (see `verify`), and so are those this user may not read (see `unreadable`).
        """
        return read_store(self.root, kind)[0]

    def companions(self, entry: Entry) -> dict[str, int]:
        """The bytes of the entry's derived companions by label (``{"decoded": n}``), those that have any."""
        return companion_sizes(self._entry_dir(entry.kind, entry.key))

    def find(self, key: str) -> Entry:
        """Return the entry whose key is ``key`` or starts with it (at least 6 characters).

        Raises
        ------
        KeyError
            None matches (or more than one), and ``key`` names no entry this user may not read.
        UnreadableEntryError
            None this user may read matches, and ``key`` names one they may not (`refuse_unreadable`).
        """
        matches = [entry for entry in self.ls() if entry.key.startswith(key)] if len(key) >= 6 else []
        if not matches:
            self.refuse_unreadable(key)
        if len(key) < 6:
            raise KeyError(f"cache key {key!r} is too short: give at least 6 characters of it")
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
            remove_companions(entry.path)
        return entry

    def verify(self) -> list[CacheProblem]:
        """Check every manifest (`read_manifest`) and re-hash every data file against it, and every derived
        companion's files against its record.

        Returns what is wrong, empty when all is good: a broken manifest is one problem
        naming ``manifest.json`` and what is wrong with it. What this user may not read is
        a problem too, with ``unreadable`` True: it could not be checked.
        """
        return check_store(self.root)

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
        return evict_entries(self.ls(), parse_size(max_size), self._evict)

    def _evict(self, entry: Entry) -> bool:
        """Remove ``entry`` unless a writer holds its key or a reader its read lock; whether it was removed."""
        try:
            with self._locked(entry.kind, entry.key, timeout=0), exclusive(readers_path(entry.path)) as taken:
                if taken:
                    self._discard(entry.path)
                    remove_companions(entry.path)
                return taken
        except LockTimeoutError:
            return False

    def gc(self, max_size: int | str | None = None) -> list[Path]:
        """Remove abandoned staging and trash directories, broken entries and derived companions whose entry is
        gone; with ``max_size``, then `evict`.

        A broken entry has a manifest that fails `read_manifest`, or a data file that
        is missing, of the wrong size or sha256 (every file is re-hashed, as by `verify`); a
        derived companion failing its record is removed too. An entry this user may not
        read is not broken:
        it is left alone (`unreadable` names it). Returns the removed paths (the evicted
        entries' directories last, least recently used first).

        Raises
        ------
        CleanupError
            After removing all it could, when something it should remove is another user's
            that this one may not delete; the message names each, its owner and what to do.
        """
        removed = sweep(self.root, self._remove_staging, self._hide)
        if max_size is not None:
            removed.extend(entry.path for entry in self.evict(max_size).evicted)
        return removed

    def _remove_staging(self, path: Path) -> OSError | None:
        """Delete an abandoned staging directory (`remove_tree`), holding its key's lock (none: `LockTimeoutError`)."""
        key = path.name[len(STAGING_PREFIX):].rsplit("-", 1)[0]
        with self._locked(path.parent.name, key, timeout=0):
            return remove_tree(path)
