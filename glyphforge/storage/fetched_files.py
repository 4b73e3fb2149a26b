"""`FetchedFiles`: the data files of an entry at a URL as this machine reads them, through its local shard cache.

An entry at a URL is the one `glyphforge.cache.Entry`, its ``path`` a folder of the local shard
cache (`glyphforge.storage.shard_cache`) and its `~glyphforge.cache.entry.DataFiles` a
`FetchedFiles`: `Entry.file` fetches a data file whole there (size and sha256 checked, by
`RemoteEntry.download`) on first use. Shards are read by byte range (`RemoteEntry.read_range`)
into the same folder (`glyphforge.builds.shard_fetch`). The cache layer does not know URLs: this
module plugs the URL side into its `Entry` from above (`fetched_entry`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from glyphforge._files import sha256_file, writing
from glyphforge.cache.entry import Entry
from glyphforge.storage.remote_entry import RemoteEntry
from glyphforge.storage.shard_cache import ShardCache

__all__ = ["FetchedFiles", "fetched_entry"]


@dataclass(frozen=True)
class FetchedFiles:
    """The `~glyphforge.cache.entry.DataFiles` of an entry at a URL: fetched into the local shard cache.

    Attributes
    ----------
    remote
        The entry at its URL (its manifest checked).
    cache
        The local shard cache.
    """

    remote: RemoteEntry
    cache: ShardCache

    def file(self, entry: Entry, name: str) -> Path:
        """Return the local copy of data file ``name``, fetched whole (size and sha256 checked) on first use."""
        size = self.remote.size(name)  # a KeyError naming the files when the manifest lists no such file
        return self.cache.whole(entry.path / name, size, lambda temporary: self.remote.download(name, temporary))

    def drop_damaged_copy(self, entry: Entry, name: str) -> bool:
        """Remove the local copy of data file ``name`` if it is no longer what the manifest records (damaged since
        it was fetched, its sha256 checked); return whether it did (the next `Entry.file` fetches it again)."""
        path = entry.path / name
        recorded = entry.manifest["files"].get(name)
        if recorded is None or not path.is_file() or sha256_file(path) == recorded["sha256"]:
            return False
        path.unlink(missing_ok=True)
        return True


def fetched_entry(remote: RemoteEntry, cache: ShardCache) -> tuple[Entry, FetchedFiles]:
    """The entry at ``remote``'s URL as this machine reads it (its folder in ``cache`` made), and its data files."""
    files = FetchedFiles(remote, cache)
    entry = Entry(cache.folder(remote.kind, remote.key), remote.manifest, files)
    with writing(entry.path):
        entry.path.mkdir(parents=True, exist_ok=True)
    return entry, files
