"""Opening a built dataset: `open_built` (an entry's path or URL), `find_built` (a kind or key in a data dir).

Both return the one reader, `~glyphforge.builds.reading.dataset.BuiltDataset`, with the same API
(``len``, ``ds[i]``, ``take``, iteration, ``stream``, ``export``, ``arrays``...) wherever the
entry lies; what differs is its shard source (`glyphforge.builds.reading.protocols.ShardSource`): an
entry on disk reads its files in place (`glyphforge.builds.reading.entry_files`), an entry in object
storage or over HTTP is read where it lies, each shard's byte range fetched into the local
shard cache and prefetched for streams (`glyphforge.builds.reading.remote_shards`).

A dataset pickles as a handle: an entry's path and key, or its URL, the storage options
without secrets, the local cache dir and the reader's settings. A DataLoader worker (or a
Dask task) opens the entry again, with its own environment's credentials.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from glyphforge._checks import PathLike
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.remote_shards import DEFAULT_PREFETCH_THREADS, open_read, open_remote
from glyphforge.cache.entry import Entry, read_entry
from glyphforge.cache.lookup import of_kind, split_target
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, is_built, read_manifest
from glyphforge.cache.remote.entries import UnlistableDataDirError
from glyphforge.cache.remote.files import entry_location
from glyphforge.cache.store_protocol import Store
from glyphforge.context import DataContext
from glyphforge.storage.location import Location, parse_place

__all__ = ["find_built", "open_built"]


def open_built(
    url: str | Location | PathLike, *, storage_options: dict[str, Any] | None = None, cache_dir: PathLike | None = None,
    cache_size: int | str | None = None, prefetch_threads: int = DEFAULT_PREFETCH_THREADS, **options: Any,
) -> BuiltDataset:
    """Open the built dataset whose entry is at ``url``, reading it where it lies (see the module docstring).

    Parameters
    ----------
    url
        The entry's URL, ``<data dir URL>/cache/<kind>/<key>`` (``s3://``, ``gs://``, ``https://``),
        or a `~glyphforge.storage.Location`; a local entry directory, or its ``file://`` URL,
        opens as usual (made absolute now: a pickled dataset opens it from any directory).
    storage_options
        fsspec's options for the URL (e.g. ``{"endpoint_url": ...}``); credentials are best left
        to the environment (they are never pickled).
    cache_dir
        The local cache dir (default ``$GLYPHFORGE_CACHE_DIR``, else the user cache dir); shards
        are kept in its ``shards/`` folder.
    cache_size
        The shard cache's size limit (bytes, or text such as ``"20GB"``; default
        ``$GLYPHFORGE_CACHE_SIZE``, else 20 GB or a tenth of its disk, whichever is smaller).
    prefetch_threads
        Threads fetching a stream's next shards ahead (0: none).
    **options
        The reader's settings: ``cache_shards``, ``arrays_limit``, ``random_access``, ``decoded_budget`` (see
        `BuiltDataset`).

    Returns
    -------
    BuiltDataset
        For a URL, one reading its shards where they lie (``ds.url``: the URL).

    Raises
    ------
    UnsupportedURLError
        A scheme glyphforge does not support, or (`MalformedURLError`) a URL naming no bucket or host.
    LookupError
        No built dataset is there (no manifest: not published yet, or a wrong URL).
    RemoteFileMissingError, RemoteAccessError, RemoteReadError
        The store could not be read (see `glyphforge.storage.reads`).
    """
    place = parse_place(url, storage_options)  # a file:// URL is its path, made absolute now
    if isinstance(place, Path):
        if storage_options:
            raise ValueError(f"storage_options apply to a URL, and {place} is a path: drop them, or give a URL")
        return _open_local(place.absolute(), **options)
    location = Location(place.url, {**place.storage_options, **storage_options}) if storage_options else place
    source = open_remote(location, cache_dir=cache_dir, cache_size=cache_size, prefetch_threads=prefetch_threads)
    return BuiltDataset(source, **options)


def _open_local(path: Path, **options: Any) -> BuiltDataset:
    entry = read_entry(path)
    if entry is None and (path / MANIFEST).is_file():
        try:
            read_manifest(path)
        except DamagedManifestError as error:
            raise DamagedManifestError(f"the entry at {path} is damaged, its {MANIFEST} fails its checks: {error}. "
                                       f"Remove it (`glyphforge cache gc --data-dir {path.parents[2]}` "
                                       "removes broken entries) and build it again") from None
    if entry is None or not is_built(entry):
        raise LookupError(f"no built dataset at {path}: give the directory of a built entry (<data dir>/cache/<kind>/"
                          "<key>), or a URL")
    return BuiltDataset(entry, **options)


def find_built(target: str, data_dir: PathLike | Location | None = None, *,
               storage_options: dict[str, Any] | None = None, cache_dir: PathLike | None = None,
               context: DataContext | None = None, **options: Any) -> BuiltDataset:
    """Return the built dataset ``target`` of a data dir, on disk or at a URL (read where it lies).

    ``target`` is a kind such as ``"scenes"`` (its only built entry; ``"scenes:newest"``: its newest, by the
    manifests' ``created``: see `glyphforge.cache.lookup`), a cache key or a unique prefix of one (6+
    characters), or, for a data dir at a URL, ``kind/key`` (the whole key: found without listing, so it
    also works where the store cannot be listed, as over HTTP). The entries are those of the data dir's
    store (`glyphforge.cache.store_protocol.Store`, `~glyphforge.context.DataContext.entry_store`), found
    by the same code on disk and at a URL.

    The data dir is the context's (`~glyphforge.context.DataContext.resolve` of ``context``, ``data_dir``,
    ``storage_options`` and ``cache_dir``; None: the environment's). One at a URL (or a
    `~glyphforge.storage.Location`) keeps the shards read in the context's local cache dir, and
    ``options`` go to `glyphforge.open_built`.

    Raises
    ------
    AmbiguousKindError
        ``target`` is a kind with several built entries (the message lists them).
    LookupError
        Nothing built matches (the message lists what is built, and what the store holds).
    UnlistableDataDirError
        ``target`` is a kind or a key prefix, and the data dir cannot be listed (HTTP).
    UnreadableEntryError
        Nothing this user may read matches, and ``target`` names an entry they may not read.
    ValueError
        ``cache_dir`` or ``options`` given for a data dir that is a path.
    """
    context = DataContext.resolve(context, data_dir=data_dir, storage_options=storage_options, cache_dir=cache_dir)
    remote = context.remote
    if remote is None and (given := sorted([*options, *(["cache_dir"] if cache_dir is not None else [])])):
        raise ValueError(f"{', '.join(given)}: only for a data dir that is a URL, and {context.data_dir} is a path; "
                         f"drop {'them' if len(given) > 1 else 'it'}, or give a URL")
    if remote is not None and "/" in target:
        return open_built(entry_location(remote, *target.split("/", 1)), cache_dir=context.cache_dir, **options)
    try:
        entry = _built_entry(context.entry_store, target)
    except UnlistableDataDirError:
        assert remote is not None, "only a store at a URL cannot be listed"
        raise UnlistableDataDirError(
            f"{remote} cannot be listed (over {remote.scheme.upper()} there is no listing), so "
            f"{target!r} cannot be looked up there: give the entry as kind/key with its whole key (e.g. "
            "scenes/<key>), or its URL to glyphforge.open_built") from None
    if remote is None:
        return BuiltDataset(entry)
    # its manifest as the listing read it, its shards cached in the context's cache dir (the store's)
    source = open_read(entry, cache_size=options.pop("cache_size", None),
                       prefetch_threads=options.pop("prefetch_threads", DEFAULT_PREFETCH_THREADS))
    return BuiltDataset(source, **options)


def _built_entry(store: Store, target: str) -> Entry:
    """The built entry of ``store`` that ``target`` names (see `find_built`): its kind's (`of_kind`, listing that kind
    only), else the one whose key starts with it (listing every entry)."""
    of_target = [entry for entry in store.ls(split_target(target)[0]) if is_built(entry)]
    if (chosen := of_kind(target, of_target, store.where)) is not None:
        return chosen
    entries = store.ls()
    built = [entry for entry in entries if is_built(entry)]
    matches = [entry for entry in entries if entry.key.startswith(target)] if len(target) >= 6 else []
    if not matches:
        store.refuse_unreadable(target)  # an entry this user may not read is there, not "none yet"
        kinds = ", ".join(sorted({entry.kind for entry in built})) or "none built yet"
        held = ", ".join(sorted({entry.kind for entry in entries})) or "nothing yet"
        why = (f"cache key {target!r} is too short: give at least 6 characters of it" if len(target) < 6 else
               f"no entry there has a key starting {target!r} (a damaged entry is not listed: `glyphforge cache "
               "verify` names it)")
        raise LookupError(f"no built dataset {target!r} in {store.where}: it is no built kind, and {why}. Give a built "
                          f"kind ({kinds}) or a cache key (prefix); it holds {held}")
    if len(matches) > 1:
        found = ", ".join(f"{entry.kind}/{entry.key[:12]}" for entry in matches[:5])
        raise LookupError(f"{target!r} matches {len(matches)} entries in {store.where} ({found}): give more of the key")
    if not is_built(matches[0]):
        raise LookupError(f"{matches[0].kind} {matches[0].key[:12]} is not a built dataset (it has no shard layout)")
    return matches[0]
