"""The content-addressed cache store: atomic entries with manifests.

Layout under the root::

    <root>/<kind>/<key>/manifest.json     a complete entry (manifest written last)
    <root>/<kind>/<key>/<name>.pklz       its data files
    <root>/<kind>/.tmp-<key>-<random>/    a writer's staging directory
    <root>/<kind>/.<key>.lock             the per-key lock (filelock)
    <root>/<kind>/<key>.work/             persistent scratch for resumable work

An entry is staged in a sibling temporary directory and renamed into place only
when complete, so readers never see a partial entry and a crash leaves either no
entry or a whole one. Staging directories left by a dead writer are removed by
the next writer of that key (it holds the key's lock) or by :meth:`CacheStore.gc`.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import filelock

from glyphforge import config
from glyphforge._checks import PathLike
from glyphforge._files import sha256_file
from glyphforge._version import __version__
from glyphforge.cache.keys import FORMAT_VERSION, cache_key, check_kind, normalise
from glyphforge.cache.pklz import dump_pklz, iter_pklz, load_pklz

MANIFEST = "manifest.json"
_STAGING_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_WORK_SUFFIX = ".work"


def _check_file_name(name: str) -> str:
    if not name or name == MANIFEST or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(
            f"entry file name {name!r} is not allowed: use a plain file name such as 'A.pklz' "
            f"(no directories, no leading dot, not {MANIFEST!r})"
        )
    return name


@dataclass(frozen=True)
class Entry:
    """A complete cache entry.

    Attributes
    ----------
    path
        The entry directory.
    manifest
        The parsed ``manifest.json``.
    """

    path: Path
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def params(self) -> dict[str, Any]:
        return self.manifest["params"]

    @property
    def meta(self) -> dict[str, Any]:
        return self.manifest["meta"]

    @property
    def files(self) -> list[str]:
        return sorted(self.manifest["files"])

    @property
    def size_bytes(self) -> int:
        return sum(info["size"] for info in self.manifest["files"].values())

    def file(self, name: str) -> Path:
        """Return the path of the data file ``name`` (KeyError listing the files if unknown)."""
        if name not in self.manifest["files"]:
            raise KeyError(f"entry {self.kind}/{self.key[:12]} has no file {name!r}; files: {self.files}")
        return self.path / name

    def load(self, name: str, trusted: bool = False) -> Any:
        """Load the pickle in data file ``name`` (safe unpickler unless ``trusted``)."""
        return load_pklz(self.file(name), trusted=trusted)

    def iter(self, name: str, trusted: bool = False) -> Iterator[Any]:
        """Yield every pickle of the multi-member data file ``name``, in order."""
        return iter_pklz(self.file(name), trusted=trusted)


def read_entry(path: Path) -> Entry | None:
    """Return the complete entry in directory ``path`` (its manifest parses), or None."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Entry(path, manifest)


@dataclass(frozen=True)
class CacheProblem:
    """One thing :meth:`CacheStore.verify` found wrong."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


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

    def write(self, name: str, obj: Any, level: int | None = None) -> Path:
        """Write ``obj`` as the gzipped pickle ``name`` (see :func:`dump_pklz`)."""
        return dump_pklz(obj, self.path / _check_file_name(name), level=level)

    def add_file(self, name: str, source: PathLike) -> Path:
        """Move an already written file into the entry as ``name``."""
        destination = self.path / _check_file_name(name)
        shutil.move(os.fspath(source), destination)
        return destination


class CacheStore:
    """A content-addressed store of gzipped pickles.

    Parameters
    ----------
    root
        The store's directory (default: ``<data dir>/cache``, see :mod:`glyphforge.config`).
    """

    def __init__(self, root: PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else config.cache_dir()
        self._locks: dict[Path, filelock.FileLock] = {}
        self._locks_guard = threading.Lock()

    @classmethod
    def for_data_dir(cls, data_dir: PathLike | None = None) -> CacheStore:
        """Return the store under ``<data dir>/cache``."""
        return cls(config.cache_dir(data_dir))

    def __repr__(self) -> str:
        return f"CacheStore({str(self.root)!r})"

    # -- addressing -------------------------------------------------------
    def key(self, kind: str, params: Mapping[str, Any]) -> str:
        """Return the hex sha256 key of ``(kind, params, format version)``."""
        return cache_key(kind, params)

    def _entry_dir(self, kind: str, key: str) -> Path:
        return self.root / check_kind(kind) / key

    def work_dir(self, kind: str, params: Mapping[str, Any]) -> Path:
        """Return (and create) a persistent scratch directory for the key's resumable work."""
        path = self.root / check_kind(kind) / f"{self.key(kind, params)}{_WORK_SUFFIX}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _lock(self, kind: str, key: str) -> filelock.FileLock:
        path = self.root / kind / f".{key}.lock"
        with self._locks_guard:
            if path not in self._locks:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._locks[path] = filelock.FileLock(path)
            return self._locks[path]

    # -- reading ----------------------------------------------------------
    def get(self, kind: str, params: Mapping[str, Any]) -> Entry | None:
        """Return the complete entry for ``(kind, params)``, or None."""
        return read_entry(self._entry_dir(kind, self.key(kind, params)))

    # -- writing ----------------------------------------------------------
    @contextmanager
    def create(self, kind: str, params: Mapping[str, Any]) -> Iterator[Writer]:
        """Stage a new entry; commit it atomically on a clean exit.

        The key's lock is held throughout. On an exception the staging directory
        is removed and nothing becomes visible. An existing entry for the same key
        is replaced atomically.
        """
        key = self.key(kind, params)
        with self._lock(kind, key):
            self._remove_stale_staging(kind, key)
            staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{key}-", dir=self.root / kind))
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
        for the lock and then read the committed entry.
        """
        entry = self.get(kind, params)
        if entry is not None:
            return entry
        with self._lock(kind, self.key(kind, params)):
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
        manifest = {
            "kind": kind,
            "key": key,
            "params": normalise(dict(params)),
            "format_version": FORMAT_VERSION,
            "glyphforge_version": __version__,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": files,
            "meta": normalise(writer.meta, "meta"),
        }
        # A plain write, not _files.atomic_path: the staging directory is invisible until the rename below.
        (writer.path / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        final = self._entry_dir(kind, key)
        replaced = self._hide(final) if final.exists() else None
        os.rename(writer.path, final)  # right after hiding: the key is without an entry only between two renames
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)

    def _hide(self, path: Path) -> Path:
        """Move ``path`` out of sight atomically; return the trash directory now holding it."""
        trash = Path(tempfile.mkdtemp(prefix=f"{_TRASH_PREFIX}{path.name}-", dir=path.parent))
        os.rename(path, trash / path.name)
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
        if not self.root.is_dir():
            return []
        return sorted(path for path in self.root.iterdir() if path.is_dir() and not path.name.startswith("."))

    def _entry_dirs(self) -> Iterator[Path]:
        for kind_dir in self._kind_dirs():
            for path in sorted(kind_dir.iterdir()):
                if path.is_dir() and not path.name.startswith(".") and not path.name.endswith(_WORK_SUFFIX):
                    yield path

    def ls(self) -> list[Entry]:
        """Return every complete entry, by kind then creation time."""
        entries = [entry for path in self._entry_dirs() if (entry := read_entry(path))]
        return sorted(entries, key=lambda entry: (entry.kind, entry.manifest.get("created", "")))

    def find(self, key: str) -> Entry:
        """Return the entry whose key is ``key`` or starts with it (at least 6 characters)."""
        if len(key) < 6:
            raise KeyError(f"cache key {key!r} is too short: give at least 6 characters of it")
        matches = [entry for entry in self.ls() if entry.key.startswith(key)]
        if len(matches) != 1:
            found = "no entry" if not matches else f"{len(matches)} entries"
            raise KeyError(f"{found} in {self.root} with a key starting {key!r}; see `glyphforge cache ls`")
        return matches[0]

    def rm(self, key: str) -> Entry:
        """Remove the entry ``key`` (or unique key prefix) and its scratch directory."""
        entry = self.find(key)
        with self._lock(entry.kind, entry.key):
            self._discard(entry.path)
            shutil.rmtree(entry.path.parent / f"{entry.key}{_WORK_SUFFIX}", ignore_errors=True)
        return entry

    def verify(self) -> list[CacheProblem]:
        """Re-hash every data file against its manifest; return what is wrong (empty: all good)."""
        problems = []
        for path in self._entry_dirs():
            entry = read_entry(path)
            if entry is None:
                problems.append(CacheProblem(path, "manifest.json is missing or unreadable"))
                continue
            problems.extend(_check_entry_files(entry, rehash=True))
        return problems

    def gc(self) -> list[Path]:
        """Remove abandoned staging and trash directories and broken entries.

        A broken entry has an unreadable manifest or a data file that is missing
        or of the wrong size. Returns the removed paths.
        """
        removed = []
        for kind_dir in self._kind_dirs():
            for path in sorted(kind_dir.iterdir()):
                if path.name.startswith(_TRASH_PREFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
                elif path.name.startswith(_STAGING_PREFIX) and self._try_remove_staging(kind_dir.name, path):
                    removed.append(path)
        for path in list(self._entry_dirs()):
            entry = read_entry(path)
            if entry is None or _check_entry_files(entry, rehash=False):
                self._discard(path)
                removed.append(path)
        return removed

    def _try_remove_staging(self, kind: str, path: Path) -> bool:
        key = path.name[len(_STAGING_PREFIX):].rsplit("-", 1)[0]
        try:
            with self._lock(kind, key).acquire(timeout=0):
                shutil.rmtree(path, ignore_errors=True)
        except filelock.Timeout:
            return False  # a live writer owns it
        return True


def _check_entry_files(entry: Entry, rehash: bool) -> list[CacheProblem]:
    problems = []
    for name, info in sorted(entry.manifest["files"].items()):
        path = entry.path / name
        if not path.is_file():
            problems.append(CacheProblem(path, "missing"))
        elif path.stat().st_size != info["size"]:
            problems.append(
                CacheProblem(path, f"size {path.stat().st_size} bytes, manifest says {info['size']} (truncated?)")
            )
        elif rehash and sha256_file(path) != info["sha256"]:
            problems.append(CacheProblem(path, "sha256 differs from the manifest (corrupted)"))
    return problems
