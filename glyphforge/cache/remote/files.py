"""`UrlFiles`: the data files of a cache entry at a URL, read where they lie or fetched into the local shard cache.

An entry at ``<data dir URL>/cache/<kind>/<key>`` is the one `glyphforge.cache.Entry` (`UrlFiles.open`):
its manifest is the one at the URL, its `~glyphforge.cache.entry.DataFiles` a `UrlFiles`, and its
``path`` its folder in the local shard cache (`glyphforge.storage.shard_cache`), made only when a
file is first fetched there. It is complete when its ``manifest.json`` is there and passes the
checks a manifest on disk passes (`glyphforge.cache.manifest.parse_manifest`): writers put the data
files first and the manifest last, so a reader never takes a partial entry for a whole one.

Its data files are read by byte range (`UrlFiles.read_range`, shards), fetched whole into a local
file with their size and sha256 checked (`UrlFiles.download`), or both into the shard cache
(`Entry.file`, `glyphforge.builds.reading.shard_fetch`). Every read goes through
`glyphforge.storage.reads.read_bytes`: retried on transient failures, and failing with an error
that names the URL, what failed and what to do (a file the entry lost is a
`~glyphforge.storage.reads.RemoteFileMissingError` saying so). The cache layer does not know
URLs: this module plugs the URL side into its `Entry` from above.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glyphforge._files import atomic_path, sha256_file
from glyphforge.cache.entry import Entry
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, is_plain_name, parse_manifest
from glyphforge.errors import IntegrityError
from glyphforge.storage.location import Location
from glyphforge.storage.reads import (
    DOWNLOAD_BLOCK,
    RemoteFileMissingError,
    ShortObjectError,
    list_names,
    object_size,
    read_bytes,
)
from glyphforge.storage.shard_cache import ShardCache
from glyphforge.urls import redacted

__all__ = ["DamagedRemoteEntryError", "UrlFiles", "damaged_at_url", "entry_location", "entry_names",
           "is_entry_folder"]


class DamagedRemoteEntryError(IntegrityError, ValueError):
    """An entry's manifest at a URL fails the manifest's checks, or a data file is not what it records."""


def damaged_at_url(url: str | Location) -> str:
    """What to do about the entry at ``url`` found damaged there (its manifest is there, a file is not as it records).

    Publishing or building it again finds its manifest and does nothing, and glyphforge deletes
    nothing at a URL: the entry's objects are deleted first, with the store's own tools.
    """
    url = redacted(str(url))
    return (f"The entry at {url} is damaged (or being replaced). glyphforge replaces nothing at a URL, and publishing "
            f"or building it again finds its manifest and does nothing: delete everything under {url}/ with the "
            "store's own tools, then publish it again from a machine whose copy is whole (`glyphforge cache verify` "
            "there checks it), or build it into that data dir again")


def is_entry_folder(kind: str, key: str | None = None) -> bool:
    """Whether the folder ``<cache>/<kind>`` (or ``<cache>/<kind>/<key>``) a listing found may be a kind (an entry).

    Not a hidden name (a lock ``.<key>.lock``, a staging folder ``.tmp-*``), nor, for a key (a
    hex digest, no dot in it), an entry's companion (``<key>.work``, ``<key>.decoded``): a listing
    that reads a manifest below such a name takes a non-entry for an entry.
    """
    return is_plain_name(kind) and (key is None or (is_plain_name(key) and "." not in key))


def entry_names(folder: Location, kind: str | None = None) -> list[str]:
    """The kinds in the store's cache folder ``folder``, or with ``kind`` the entry keys in its folder of that kind
    (`is_entry_folder`), sorted, fresh from the store (`list_names`)."""
    return [name for name in list_names(folder) if (is_entry_folder(name) if kind is None else
                                                    is_entry_folder(kind, name))]


def entry_location(data_dir: Location, kind: str, key: str) -> Location:
    """The URL of entry ``kind``/``key`` in the data dir at ``data_dir``: ``<data_dir>/cache/<kind>/<key>``."""
    return data_dir.child("cache", kind, key)


@dataclass(frozen=True)
class UrlFiles:
    """The `~glyphforge.cache.entry.DataFiles` of the entry at ``location`` (see the module docstring).

    Attributes
    ----------
    location
        The entry's URL, ``<data dir>/cache/<kind>/<key>`` (and the store's options).
    cache
        This machine's shard cache, where its files are fetched.
    """

    location: Location
    cache: ShardCache

    @property
    def url(self) -> str:
        """The entry's URL."""
        return self.location.url

    def entry(self, manifest: dict[str, Any]) -> Entry:
        """The entry at ``location`` whose checked manifest is ``manifest`` (its folder in the shard cache not made)."""
        return Entry(self.cache.folder(manifest["kind"], manifest["key"]), manifest, self)

    def open(self) -> Entry | None:
        """Return the complete entry at ``location``, or None when it has no manifest (absent, or not finished).

        Raises
        ------
        DamagedRemoteEntryError
            Its manifest is there but fails the checks (the message says how, and names the URL).
        RemoteAccessError, RemoteReadError
            The store could not be read (credentials, network; see `glyphforge.storage.reads`).
        """
        manifest_url = self.location.child(MANIFEST)
        try:
            text = read_bytes(manifest_url, what="the manifest of an entry")
        except RemoteFileMissingError as error:
            if error.no_bucket:
                raise
            return None
        kind, key = self.url.rsplit("/", 2)[-2:]
        try:
            return self.entry(parse_manifest(text, kind, key))
        except DamagedManifestError as error:
            raise DamagedRemoteEntryError(f"{manifest_url} is not a valid manifest: {error}. "
                                          f"{damaged_at_url(self.location)}") from None

    def where(self, entry: Entry) -> str:
        """The entry's URL (where it lies, for messages: `glyphforge.urls.redacted`)."""
        return redacted(self.url)

    def file(self, entry: Entry, name: str) -> Path:
        """Return the local copy of data file ``name``, fetched whole (size and sha256 checked) on first use."""
        size = self.size(entry, name)  # a KeyError naming the files when the manifest lists no such file
        return self.cache.whole(entry.path / name, size, lambda temporary: self.download(entry, name, temporary))

    def drop_damaged_copy(self, entry: Entry, name: str) -> bool:
        """Remove the local copy of data file ``name`` if it is no longer what the manifest records (damaged since
        it was fetched, its sha256 checked); return whether it did (the next `Entry.file` fetches it again)."""
        path = entry.path / name
        recorded = entry.manifest["files"].get(name)
        if recorded is None or not path.is_file() or sha256_file(path) == recorded["sha256"]:
            return False
        path.unlink(missing_ok=True)
        return True

    def size(self, entry: Entry, name: str) -> int:
        """The size the manifest records for data file ``name`` (KeyError naming the files when it lists none)."""
        if name not in entry.manifest["files"]:
            raise KeyError(f"entry {entry.kind}/{entry.key[:12]} at {redacted(self.url)} has no file {name!r}; files: "
                           f"{entry.files}")
        return int(entry.manifest["files"][name]["size"])

    def check_size(self, entry: Entry, name: str) -> None:
        """Raise a `DamagedRemoteEntryError` when the store holds data file ``name`` at another size than the manifest
        records (an HTTP server that does not say passes: the reads and the sha256 check it then)."""
        declared, url = self.size(entry, name), self.location.child(name)
        found = object_size(url, what=f"a file of the {entry.kind} entry {entry.key[:12]}")
        if found is not None and found != declared:
            shorter = "shorter" if found < declared else "longer"
            raise DamagedRemoteEntryError(
                f"{url} is {shorter} than the {declared:,} bytes its manifest records: the store holds {found:,} "
                f"bytes, and none of them were fetched. {damaged_at_url(self.url)}")

    def read_range(self, entry: Entry, name: str, offset: int, length: int, *, what: str = "") -> bytes:
        """Return ``length`` bytes of data file ``name`` from byte ``offset`` (one ranged read, retried).

        ``what`` says what the bytes are in messages (e.g. ``"shard 7"``).

        Raises
        ------
        RemoteFileMissingError
            The entry lost the file (deleted at its URL): the message says so.
        DamagedRemoteEntryError
            The file is shorter than its manifest records.
        RemoteAccessError, RemoteReadError
            See `glyphforge.storage.reads`.
        """
        size = self.size(entry, name)
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError(f"bytes {offset} to {offset + length} are outside {name} of {redacted(self.url)} "
                             f"({size:,} bytes)")
        about = f"{what} of " if what else ""
        try:
            return read_bytes(self.location.child(name), offset, offset + length,
                              what=f"{about}the {entry.kind} entry {entry.key[:12]}")
        except RemoteFileMissingError as error:
            raise RemoteFileMissingError(
                f"the {entry.kind} entry at {redacted(self.url)} lost its file {name}: {error}. Its manifest is still "
                f"there. {damaged_at_url(self.url)}") from None
        except ShortObjectError as error:
            raise DamagedRemoteEntryError(
                f"{self.location.child(name)} is shorter than the {size:,} bytes its manifest records: "
                f"{error}. {damaged_at_url(self.url)}") from None

    def download(self, entry: Entry, name: str, destination: Path) -> Path:
        """Fetch data file ``name`` whole to ``destination`` (atomically), checking its size and sha256.

        The object's size at the URL is asked first (`check_size`), and no more bytes than the
        manifest records are ever read.

        Raises
        ------
        DamagedRemoteEntryError
            The file is not the size or sha256 its manifest records; nothing is left at ``destination``.
        RemoteFileMissingError, RemoteAccessError, RemoteReadError
            See `read_range`.
        """
        total = self.size(entry, name)  # a KeyError naming the files when the manifest lists no such file
        self.check_size(entry, name)
        expected = entry.manifest["files"][name]
        digest, size = hashlib.sha256(), 0
        with atomic_path(destination) as temporary, open(temporary, "wb") as out:
            for offset in range(0, total, DOWNLOAD_BLOCK):  # block by block: each read retried on its own
                block = self.read_range(entry, name, offset, min(DOWNLOAD_BLOCK, total - offset))
                digest.update(block)
                out.write(block)
                size += len(block)
            if (size, digest.hexdigest()) != (expected["size"], expected["sha256"]):
                raise DamagedRemoteEntryError(
                    f"{self.location.child(name)} is {size:,} bytes with sha256 {digest.hexdigest()}, where the "
                    f"manifest records {expected['size']:,} bytes and {expected['sha256']}. {damaged_at_url(self.url)}")
        return destination
