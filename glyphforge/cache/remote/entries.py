"""`RemoteCache`: the entries of a data dir at a URL, listed and verified where they lie (read only).

It is the `glyphforge.cache.store_protocol.Store` of a data dir at a URL
(`glyphforge.DataContext.entry_store`): ``glyphforge cache ls``, ``cache verify`` and ``info``
read the store ``<url>/cache/<kind>/<key>/`` as they read ``<data dir>/cache``, with the same
entries (`glyphforge.cache.Entry`, their data files `~glyphforge.cache.remote.files.UrlFiles`:
nothing is fetched, nor any local folder made, to list them) and
`~glyphforge.cache.problems.CacheProblem` s: one listing of
the objects under ``<url>/cache`` (s3://, gs://, file://; an http(s):// data dir cannot be
listed: `UnlistableDataDirError`), then the manifests, checked as on disk
(`glyphforge.cache.manifest.parse_manifest`). An entry whose data files are there without
its ``manifest.json`` is an upload in progress or interrupted (writers put the manifest
last): it is not listed, and verify names it as `INCOMPLETE`, not as damaged. glyphforge
deletes nothing at a URL: ``rm``, ``gc`` and ``evict`` raise `ReadOnlyStoreError`, saying how
to delete there.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import NoReturn

from glyphforge._checks import PathLike
from glyphforge.cache.entry import Entry
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, parse_manifest
from glyphforge.cache.problems import INCOMPLETE, CacheProblem, Scan
from glyphforge.cache.remote.files import UrlFiles, is_entry_folder
from glyphforge.errors import ArgumentError
from glyphforge.storage.backend import ReadOnlyStoreError
from glyphforge.storage.location import Location
from glyphforge.storage.reads import DOWNLOAD_BLOCK, store_call
from glyphforge.storage.shard_cache import ShardCache
from glyphforge.urls import redacted

__all__ = ["UNFINISHED", "RemoteCache", "UnlistableDataDirError"]

#: What an entry folder holding data files but no manifest is, and what to do.
UNFINISHED = ("data files without manifest.json: an upload in progress, or an interrupted one (not an entry yet; "
              "publishing it again finishes it)")


class UnlistableDataDirError(ArgumentError, LookupError, ValueError):
    """A data dir at a URL whose store cannot be listed (HTTP has no listing), asked for what only a listing finds
    (its entries, a kind, a key prefix); the message says what works instead."""


@dataclass(frozen=True)
class _Listing:
    """The objects of the entry folder ``<cache>/<kind>/<key>/`` at ``location``: ``{name: size in bytes}``."""

    kind: str
    key: str
    location: Location
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoteCache:
    """The store ``<data_dir>/cache`` of a data dir at a URL (see the module docstring).

    Attributes
    ----------
    data_dir
        The data dir's URL and fsspec options.
    local_copy
        This machine's copy of it (`glyphforge.DataContext.data_dir`), named where deleting is refused.
    cache_dir
        The local cache dir whose shard cache the entries' files are fetched into (None: the default; see
        `glyphforge.storage.shard_cache.ShardCache`).
    """

    data_dir: Location
    local_copy: Path | None = None
    cache_dir: PathLike | None = None

    @cached_property
    def root(self) -> Location:
        """``<data dir>/cache``."""
        return self.data_dir.child("cache")

    @property
    def where(self) -> str:
        """``<data dir URL>/cache``, for messages (`glyphforge.urls.redacted`)."""
        return redacted(self.root.url)

    @property
    def place(self) -> str:
        """Where the store is, for messages: ``at <data dir URL>``."""
        return f"at {self.data_dir}"

    @property
    def repair(self) -> str:
        """What to do about damage at the URL: glyphforge deletes nothing there."""
        return ("glyphforge does not delete at a URL, and publishing or building a damaged entry again finds its "
                "manifest and does nothing: delete each damaged entry's objects with the store's own tools first, "
                "then publish it again from a machine whose copy is whole, or build it there again")

    def scan(self) -> Scan:
        """List the store once and read every manifest (see `Scan`; an entry without its manifest is `INCOMPLETE`).

        Raises
        ------
        UnlistableDataDirError
            For an http(s):// data dir (HTTP cannot list).
        RemoteReadError
            When the URL cannot be read (network, permissions, credentials).
        """
        return Scan(*self._read(self._listings()))

    def _read(self, listings: list[_Listing]) -> tuple[list[Entry], list[CacheProblem]]:
        """The complete entries and the problems of `scan`, from the listing ``listings``."""
        names = [f"{listing.kind}/{listing.key}/{MANIFEST}" for listing in listings if MANIFEST in listing.sizes]
        root = self.root
        texts = (store_call(root, lambda: root.backend.read_objects(names), f"read the manifests under {root}")
                 if names else {})
        entries: list[Entry] = []
        shards = ShardCache(self.cache_dir)  # where their files would be fetched (nothing is, to list them)
        broken: list[CacheProblem] = []
        incomplete: list[CacheProblem] = []
        for listing in listings:
            if MANIFEST not in listing.sizes:
                incomplete.append(CacheProblem(str(listing.location), UNFINISHED, INCOMPLETE))
                continue
            text = texts.get(f"{listing.kind}/{listing.key}/{MANIFEST}", b"")
            try:
                if isinstance(text, BaseException):
                    raise DamagedManifestError(f"unreadable ({text})")
                parsed = parse_manifest(text, listing.kind, listing.key)
                entries.append(UrlFiles(listing.location, shards).entry(parsed))
            except DamagedManifestError as error:
                broken.append(CacheProblem(str(listing.location.child(MANIFEST)), str(error)))
        entries.sort(key=lambda entry: (entry.kind, entry.manifest.get("created", "")))
        return entries, incomplete + broken

    def ls(self, kind: str | None = None) -> list[Entry]:
        """Return every complete entry at the URL (of ``kind`` only, when given: only ``<cache>/<kind>/`` is listed),
        by kind then creation time (broken ones skipped: `verify`)."""
        return self._read(self._listings(kind))[0]

    def unreadable(self) -> list[CacheProblem]:
        """None: what this user may not read at a URL is an error (`RemoteAccessError`) naming it, not a problem."""
        return []

    def refuse_unreadable(self, target: str) -> None:
        """Nothing to refuse: what this user may not read at a URL is an error (`RemoteAccessError`) when listed."""

    def companions(self, entry: Entry) -> dict[str, int]:
        """None: companions (a decoded copy...) are made on the machine reading an entry, never at its URL."""
        return {}

    def verify(self) -> list[CacheProblem]:
        """Check every manifest and re-hash every data file against it, streaming each file once.

        Returns what the listing found incomplete (`INCOMPLETE`: no manifest yet, not damaged),
        then the broken manifests, then each data file missing, of the wrong size or with the wrong sha256.
        """
        listings = self._listings()
        entries, problems = self._read(listings)
        sizes = {(listing.kind, listing.key): listing.sizes for listing in listings}
        for entry in entries:
            problems.extend(_check_files(self.root.child(entry.kind, entry.key), entry,
                                         sizes.get((entry.kind, entry.key), {})))
        return problems

    def rm(self, key: str) -> NoReturn:
        """Refused: `ReadOnlyStoreError`."""
        self._refuse("rm")

    def gc(self, max_size: int | str | None = None) -> NoReturn:
        """Refused: `ReadOnlyStoreError`."""
        self._refuse("gc")

    def evict(self, max_size: int | str) -> Eviction:
        """Refused: `ReadOnlyStoreError`."""
        self._refuse("gc")

    def _refuse(self, command: str) -> NoReturn:
        local = (f"; to clean this machine's copy of it, run the command with --data-dir {self.local_copy}"
                 if self.local_copy is not None else "")
        raise ReadOnlyStoreError(
            f"glyphforge cache {command} never deletes anything at a URL ({self.data_dir}) in this version. Remove "
            "an entry there with the store's own tools, its manifest.json first so that no reader trusts it any more "
            f"({self.data_dir}/cache/KIND/KEY/manifest.json, e.g. with `aws s3 rm` or `gcloud storage rm`, then the "
            f"rest of the folder){local}")

    def check_listable(self) -> None:
        """Raise `UnlistableDataDirError` for a data dir whose store cannot be listed (http(s)), saying what works."""
        if self.data_dir.read_only:
            raise UnlistableDataDirError(
                f"{self.data_dir} cannot be listed: HTTP has no listing of a folder's objects, so its entries "
                "cannot be named. Load a dataset from it with data_dir= (entries are read from their known paths) "
                "or open a built one by its entry URL (glyphforge.open_built), or list the store it is served from "
                "(s3://, gs://, file://)")

    def _listings(self, kind: str | None = None) -> list[_Listing]:
        """One listing of the objects under ``<data dir>/cache`` (under ``<data dir>/cache/<kind>`` only, when given),
        grouped by entry folder ``<kind>/<key>``."""
        self.check_listable()
        if kind is not None and not is_entry_folder(kind):
            return []  # no kind's folder: nothing of it is listed
        folder = self.root if kind is None else self.root.child(kind)
        found = store_call(folder, folder.backend.sizes_below, f"list {self.root}")  # as a whole listing says it
        folders: dict[tuple[str, str], dict[str, int]] = {}
        for path, size in found.items():
            parts = ([] if kind is None else [kind]) + path.split("/")
            if len(parts) == 3 and parts[2] and not parts[2].startswith("."):
                folders.setdefault((parts[0], parts[1]), {})[parts[2]] = size
        # what is not an entry's file <kind>/<key>/<name> is left out: a lock, a staging or work folder's...
        return [_Listing(kind, key, self.root.child(kind, key), sizes)
                for (kind, key), sizes in sorted(folders.items()) if is_entry_folder(kind, key)]


def _check_files(location: Location, entry: Entry, sizes: dict[str, int]) -> Iterator[CacheProblem]:
    """The problems of the data files of ``entry``, at ``location``: missing, of the wrong size, or with the wrong
    sha256."""
    for name, info in sorted(entry.manifest["files"].items()):
        url = location.child(name)
        if name not in sizes:
            yield CacheProblem(str(url), "missing (deleted, or never uploaded)")
        elif sizes[name] != info["size"]:
            yield CacheProblem(str(url), f"size {sizes[name]} bytes, manifest says {info['size']} (truncated or "
                                        "replaced?)")
        elif _sha256(url) != info["sha256"]:
            yield CacheProblem(str(url), "sha256 differs from the manifest (corrupted, or replaced)")


def _sha256(location: Location) -> str:
    """The sha256 of the object at ``location``, streamed (`DOWNLOAD_BLOCK` bytes in memory at a time)."""
    def stream() -> str:
        digest = hashlib.sha256()
        with location.backend.open_read(DOWNLOAD_BLOCK) as opened:
            while block := opened.read(DOWNLOAD_BLOCK):
                digest.update(block)
        return digest.hexdigest()

    return store_call(location, stream, f"read {location}")
