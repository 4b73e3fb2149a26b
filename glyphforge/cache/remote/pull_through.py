"""`PullThrough`: the source of the local cache store of a data dir at a URL, the entries found there.

A loader given a URL data dir (``load_emnist(data_dir="s3://bucket/data")``) reads prepared
entries through ``context.store``, which for such a context is the `CacheStore` of the local
data dir under the local cache (``<local cache>/data/cache``, see
`glyphforge.context.DataContext`) with a `PullThrough` of the URL as its source. Its
:meth:`~glyphforge.cache.store.CacheStore.get` looks here first, then (:meth:`PullThrough.fetch`)
at ``<url>/cache/<kind>/<key>`` (an `Entry` whose files are `glyphforge.cache.remote.files.UrlFiles`): an entry
there is fetched whole, each data file checked against the size and sha256 its manifest
records, staged and committed under the key's lock like every local entry, with the same
manifest (so its key and ``entry_sha256`` are the ones at the URL). The second load is
local: no request is made for an entry already here.

Only prepared entries are fetched so: a built dataset at the URL is read where it lies, by
byte range (`glyphforge.open_built`), and :meth:`~PullThrough.fetch` leaves it alone
(None). An entry that is not at the URL is made on this machine by the loaders that may
(``download=True``), into the local store only: glyphforge never writes to a data dir URL
by itself (publishing is explicit: `glyphforge publish`, ``prepare-data NAME --data-dir URL``);
one INFO line says so. A damaged entry at the URL (a manifest failing the checks, a file
of the wrong size or hash) is an error naming it, and leaves nothing in the local store.
Reads go through `glyphforge.storage.reads`: a dropped connection, a timeout or a 5xx
answer is tried again; a refusal (403, wrong credentials) is a `RemoteAccessError` at once,
naming the URL and where credentials come from.

The URL is read even in offline mode: it is the data dir asked for, not a source of
upstream files (offline mode keeps loaders from downloading upstream files).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from glyphforge._checks import PathLike
from glyphforge.cache.entry import Entry
from glyphforge.cache.manifest import is_built
from glyphforge.cache.remote.files import UrlFiles, entry_location
from glyphforge.cache.store import CacheStore
from glyphforge.cache.writer import Writer
from glyphforge.storage.location import Location
from glyphforge.storage.shard_cache import ShardCache

__all__ = ["PullThrough"]

log = logging.getLogger(__name__)

#: The entries (URL) already said to be missing at their URL in this process: the INFO line is said once each.
_TOLD: set[str] = set()


class PullThrough:
    """The data dir at ``remote`` as the source of a local `CacheStore` (`glyphforge.cache.store.EntrySource`):
    prepared entries the store lacks are fetched from there.

    Parameters
    ----------
    remote
        The data dir's URL (and fsspec options); its entries are at ``<remote>/cache/<kind>/<key>``.
    cache_dir
        The local cache dir (None: the default): its shard cache is where the entries at the URL lie on this machine
        (`glyphforge.cache.remote.files.UrlFiles`); what is fetched goes into the store.
    """

    def __init__(self, remote: Location, cache_dir: PathLike | None = None) -> None:
        self.remote = remote
        self.cache_dir = cache_dir
        self._absent: set[tuple[str, str]] = set()  # keys not at the URL (asked once per source)

    def __repr__(self) -> str:
        return f"PullThrough({str(self.remote)!r})"

    def where(self, root: Path) -> str:
        """Where entries are looked for, for messages: the URL and this machine's copy of it (at ``root``)."""
        return f"{self.remote} (nor in this machine's copy of it, {root}; {self._how_to_publish('prepare-data')})"

    def fetch(self, store: CacheStore, kind: str, params: Mapping[str, Any]) -> Entry | None:
        """Fetch the prepared entry ``(kind, params)`` from the URL into ``store`` and return it there.

        Returns None when the URL lacks it (and for a built dataset at the URL, which is read
        where it lies: `glyphforge.open_built`).

        Raises
        ------
        DamagedRemoteEntryError
            The entry at the URL is damaged (its manifest, or a data file's size or sha256);
            nothing is left in the local store.
        RemoteReadError, RemoteAccessError
            The URL could not be read (network, permissions, credentials): see `glyphforge.storage.reads`.
        """
        key = store.key(kind, params)
        if (kind, key) in self._absent:
            return None
        location = entry_location(self.remote, kind, key)
        files = UrlFiles(location, ShardCache(self.cache_dir))
        remote = files.open()
        if remote is None or is_built(remote):
            self._absent.add((kind, key))
            if remote is None and location.url not in _TOLD:
                _TOLD.add(location.url)
                log.info("%s %s is not at %s: where loading may prepare it, it is made on this machine, in %s. "
                         "glyphforge never writes to a URL by itself: %s", kind, key[:12], self.remote, store.root,
                         self._how_to_publish(f"prepare-data {kind}"))
            return None
        return store.make(kind, params, lambda writer: _copy(remote, files, writer))

    def _how_to_publish(self, command: str) -> str:
        """How to put an entry made here at the URL (``command``: the prepare-data command that makes it)."""
        if self.remote.read_only:
            return f"{self.remote} is read-only (HTTP): publish it to the store that URL serves"
        return f"to share it there, publish it (`{command} --data-dir {self.remote}`, or `glyphforge publish`)"


def _copy(remote: Entry, files: UrlFiles, writer: Writer) -> None:
    """Stage the data files of ``remote`` (``files``: at its URL, each checked) and its manifest into ``writer``."""
    log.info("fetching %s %s from %s (%d files, %d bytes)", remote.kind, remote.key[:12], remote.where,
             len(remote.files), remote.size_bytes)
    for name in remote.files:
        files.download(remote, name, writer.path / name)
        writer.known_sha256[name] = remote.manifest["files"][name]["sha256"]
    writer.manifest = remote.manifest
