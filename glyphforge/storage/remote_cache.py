"""`RemoteCache`: the entries of a data dir at a URL, listed and verified where they lie (read only).

``glyphforge cache ls``, ``cache verify`` and ``info`` with ``--data-dir URL`` read the store
``<url>/cache/<kind>/<key>/`` as the local commands read ``<data dir>/cache``: one listing of
the objects under ``<url>/cache`` (s3://, gs://, file://; an http(s):// data dir cannot be
listed: `UnlistableURLError`), then the manifests, checked as on disk
(`glyphforge.cache.manifest.parse_manifest`). An entry whose data files are there without
its ``manifest.json`` is an upload in progress or interrupted (writers put the manifest
last): it is not listed, and verify names it as incomplete, not as damaged.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from glyphforge.cache.manifest import MANIFEST, BrokenManifestError, parse_manifest
from glyphforge.errors import ArgumentError
from glyphforge.storage.location import Location
from glyphforge.storage.reads import is_missing_bucket, store_call
from glyphforge.storage.remote_entry import DOWNLOAD_BLOCK, RemoteEntry, is_entry_folder

__all__ = ["INCOMPLETE", "RemoteCache", "RemoteProblem", "UnlistableURLError"]

#: What an entry folder holding data files but no manifest is, and what to do.
INCOMPLETE = ("data files without manifest.json: an upload in progress, or an interrupted one (not an entry yet; "
              "publishing it again finishes it)")


class UnlistableURLError(ArgumentError, ValueError):
    """A data dir URL whose store cannot be listed (HTTP has no listing); the message says what works instead."""


@dataclass(frozen=True)
class RemoteProblem:
    """One thing wrong at a URL: ``url`` (a manifest or a data file) and what."""

    url: str
    message: str

    def __str__(self) -> str:
        return f"{self.url}: {self.message}"


@dataclass(frozen=True)
class _Listing:
    """The objects of the entry folder ``<cache>/<kind>/<key>/`` at ``location``: ``{name: size in bytes}``."""

    kind: str
    key: str
    location: Location
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Scan:
    """What one listing of a remote store found.

    Attributes
    ----------
    entries
        The complete entries (manifest there and passing the checks), by kind then creation time.
    broken
        Manifests failing the checks (one problem each).
    incomplete
        Entry URLs holding data files but no manifest (an upload in progress, or interrupted).
    """

    entries: list[RemoteEntry]
    broken: list[RemoteProblem]
    incomplete: list[str]


@dataclass(frozen=True)
class RemoteCache:
    """The store ``<data_dir>/cache`` of a data dir at a URL (see the module docstring).

    Attributes
    ----------
    data_dir
        The data dir's URL and fsspec options.
    """

    data_dir: Location

    @property
    def root(self) -> Location:
        """``<data dir>/cache``."""
        return self.data_dir.child("cache")

    def scan(self) -> Scan:
        """List the store once and read every manifest (see `Scan`).

        Raises
        ------
        UnlistableURLError
            For an http(s):// data dir (HTTP cannot list).
        RemoteReadError
            When the URL cannot be read (network, permissions, credentials).
        """
        return self._scan(self._listings())

    def _scan(self, listings: list[_Listing]) -> Scan:
        """`scan`, from the listing ``listings``."""
        manifests = [listing.location.child(MANIFEST) for listing in listings if MANIFEST in listing.sizes]
        paths = [manifest.path for manifest in manifests]
        texts = store_call(self.root, lambda: self.root.fs.cat(paths, on_error="return"),
                           f"read the manifests under {self.root}") if paths else {}
        entries, broken, incomplete = [], [], []
        for listing in listings:
            if MANIFEST not in listing.sizes:
                incomplete.append(listing.location.url)
                continue
            manifest = listing.location.child(MANIFEST)
            text = texts.get(manifest.path, b"")
            try:
                if isinstance(text, BaseException):
                    raise BrokenManifestError(f"unreadable ({text})")
                entries.append(RemoteEntry(listing.location, parse_manifest(text, listing.kind, listing.key)))
            except BrokenManifestError as error:
                broken.append(RemoteProblem(manifest.url, str(error)))
        entries.sort(key=lambda entry: (entry.kind, entry.manifest.get("created", "")))
        return Scan(entries, broken, incomplete)

    def ls(self) -> list[RemoteEntry]:
        """Return every complete entry at the URL, by kind then creation time (broken ones skipped: `verify`)."""
        return self.scan().entries

    def verify(self) -> tuple[Scan, list[RemoteProblem]]:
        """Check every manifest and re-hash every data file against it, streaming each file once.

        Returns
        -------
        tuple of Scan and list of RemoteProblem
            What the listing found, and what is wrong: the broken manifests, then each data
            file missing, of the wrong size or with the wrong sha256. Incomplete entries
            (no manifest yet) are in the scan, not problems.
        """
        listings = self._listings()
        scan = self._scan(listings)
        sizes = {listing.location.url: listing.sizes for listing in listings}
        problems = list(scan.broken)
        for entry in scan.entries:
            problems.extend(_check_files(entry, sizes.get(entry.url, {})))
        return scan, problems

    def check_listable(self) -> None:
        """Raise `UnlistableURLError` for a data dir whose store cannot be listed (http(s)://), saying what works."""
        if self.data_dir.read_only:
            raise UnlistableURLError(
                f"{self.data_dir} cannot be listed: HTTP has no listing of a folder's objects, so its entries "
                "cannot be named. Load a dataset from it with data_dir= (entries are read from their known paths) "
                "or open a built one by its entry URL (glyphforge.open_built), or list the store it is served from "
                "(s3://, gs://, file://)")

    def _listings(self) -> list[_Listing]:
        """One listing of the objects under ``<data dir>/cache``, grouped by entry folder ``<kind>/<key>``."""
        self.check_listable()
        fs, root = self.root.fs, self.root.path.rstrip("/")

        def find() -> dict[str, Any]:
            fs.invalidate_cache(root)
            try:
                return dict(fs.find(root, detail=True))
            except FileNotFoundError as error:
                if is_missing_bucket(error):
                    raise
                return {}

        found = store_call(self.root, find, f"list {self.root}")
        listings: dict[tuple[str, str], _Listing] = {}
        for path, info in found.items():
            parts = path[len(root) + 1:].split("/") if path.startswith(root + "/") else []
            if len(parts) != 3 or not is_entry_folder(*parts[:2]) or parts[2].startswith(".") or not parts[2]:
                continue  # not an entry's file <kind>/<key>/<name>: a lock, a staging or work folder's...
            kind, key, name = parts
            listing = listings.setdefault((kind, key), _Listing(kind, key, self.root.child(kind, key)))
            listing.sizes[name] = int(info.get("size") or 0)
        return [listings[place] for place in sorted(listings)]


def _check_files(entry: RemoteEntry, sizes: dict[str, int]) -> Iterator[RemoteProblem]:
    """The problems of ``entry``'s data files: missing, of the wrong size, or with the wrong sha256."""
    for name, info in sorted(entry.manifest["files"].items()):
        url = entry.location.child(name)
        if name not in sizes:
            yield RemoteProblem(url.url, "missing (deleted, or never uploaded)")
        elif sizes[name] != info["size"]:
            yield RemoteProblem(url.url, f"size {sizes[name]} bytes, manifest says {info['size']} (truncated or "
                                         "replaced?)")
        elif _sha256(url) != info["sha256"]:
            yield RemoteProblem(url.url, "sha256 differs from the manifest (corrupted, or replaced)")


def _sha256(location: Location) -> str:
    """The sha256 of the object at ``location``, streamed (`DOWNLOAD_BLOCK` bytes in memory at a time)."""
    def stream() -> str:
        digest = hashlib.sha256()
        with location.fs.open(location.path, "rb", block_size=DOWNLOAD_BLOCK) as opened:
            while block := opened.read(DOWNLOAD_BLOCK):
                digest.update(block)
        return digest.hexdigest()

    return store_call(location, stream, f"read {location}")
