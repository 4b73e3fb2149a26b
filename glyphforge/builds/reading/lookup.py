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
from glyphforge.builds.reading.remote_shards import DEFAULT_PREFETCH_THREADS, open_remote
from glyphforge.cache.entry import Entry, read_entry
from glyphforge.cache.lookup import of_kind, split_target
from glyphforge.cache.manifest import MANIFEST, BrokenManifestError, is_built, parse_manifest, read_manifest
from glyphforge.cache.remote.files import UrlFiles, entry_location, entry_names
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError
from glyphforge.storage.location import Location, parse_place
from glyphforge.storage.reads import RemoteFileMissingError, read_bytes
from glyphforge.storage.shard_cache import ShardCache

__all__ = ["UnlistableDataDirError", "find_built", "find_remote_built", "open_built"]


class UnlistableDataDirError(ArgumentError, LookupError):
    """A kind or key prefix was given for a data dir that cannot be listed (over HTTP): give kind/key instead."""


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
        except BrokenManifestError as error:
            raise BrokenManifestError(f"the entry at {path} is damaged, its {MANIFEST} fails its checks: {error}. "
                                      f"Remove it (`glyphforge cache gc --data-dir {path.parents[2]}` "
                                      "removes broken entries) and build it again") from None
    if entry is None or not is_built(entry):
        raise LookupError(f"no built dataset at {path}: give the directory of a built entry (<data dir>/cache/<kind>/"
                          "<key>), or a URL")
    return BuiltDataset(entry, **options)


def find_built(target: str, data_dir: PathLike | Location | None = None, *,
               storage_options: dict[str, Any] | None = None, cache_dir: PathLike | None = None,
               context: DataContext | None = None, **options: Any) -> BuiltDataset:
    """Return the built dataset ``target``: a cache key (prefix), or a kind such as ``"scenes"`` (its only entry;
    ``"scenes:newest"``: its newest, see `glyphforge.cache.lookup`).

    The data dir is the context's (`~glyphforge.context.DataContext.resolve` of ``context``, ``data_dir``,
    ``storage_options`` and ``cache_dir``; None: the environment's). One at a URL (or a
    `~glyphforge.storage.Location`) is read where it lies (`find_remote_built`; ``target`` may also
    be ``kind/key``, found without listing, as over HTTP; its shards kept in the context's local
    cache dir; ``options`` go to `glyphforge.open_built`).

    Raises
    ------
    LookupError
        Nothing built matches (the message lists what is built), or an `AmbiguousKindError`: a kind with
        several entries (listed).
    ValueError
        ``cache_dir`` or ``options`` given for a data dir that is a path.
    """
    context = DataContext.resolve(context, data_dir=data_dir, storage_options=storage_options, cache_dir=cache_dir)
    if context.remote is not None:
        return find_remote_built(target, context.remote, cache_dir=context.cache_dir, **options)
    if given := sorted([*options, *(["cache_dir"] if cache_dir is not None else [])]):
        raise ValueError(f"{', '.join(given)}: only for a data dir that is a URL, and {context.data_dir} is a path; "
                         f"drop {'them' if len(given) > 1 else 'it'}, or give a URL")
    store = context.store
    built = [entry for entry in store.ls() if is_built(entry)]
    if (chosen := of_kind(target, built, store.root)) is not None:
        return BuiltDataset(chosen)
    try:
        entry = store.find(target)
    except KeyError as error:
        kinds = ", ".join(sorted({entry.kind for entry in built})) or "none built yet"
        raise LookupError(f"no built dataset {target!r}: {error.args[0]}. Give a built kind ({kinds}) or a cache "
                          "key (prefix)") from None
    if entry not in built:
        raise LookupError(f"{entry.kind} {entry.key[:12]} is not a built dataset (it has no shard layout)")
    return BuiltDataset(entry)


def find_remote_built(target: str, location: Location, **options: Any) -> BuiltDataset:
    """Return the built dataset ``target`` of the data dir at the URL ``location`` (see `find_built`).

    ``target`` is a kind (its only entry; ``"KIND:newest"``: its newest, by the manifests'
    ``created``), a cache key or a unique prefix of one, or ``kind/key`` (the whole key: found
    without listing, so it also works where the store cannot be listed, as over HTTP).
    ``options`` go to `open_built`.

    Raises
    ------
    AmbiguousKindError
        ``target`` is a kind with several built entries there (the message lists them).
    LookupError
        Nothing built there matches (the message lists what is).
    UnlistableDataDirError
        ``target`` is a kind or a key prefix, and the data dir cannot be listed (HTTP).
    """
    if "/" in target:
        kind, key = target.split("/", 1)
        return open_built(entry_location(location, kind, key), **options)
    if location.read_only:
        raise UnlistableDataDirError(
            f"{location} cannot be listed (over {location.scheme.upper()} there is no listing), so {target!r} cannot "
            "be looked up there: give the entry as kind/key with its whole key (e.g. scenes/<key>), or its URL to "
            "glyphforge.open_built")
    cache = location.child("cache")
    kinds = entry_names(cache)
    kind = split_target(target)[0]
    built: list[Entry] = []
    if kind in kinds:  # their files would be fetched into the shard cache open_built reads through
        built = _built_entries(cache.child(kind), kind, ShardCache(options.get("cache_dir"), options.get("cache_size")))
    if (chosen := of_kind(target, built, cache)) is not None:
        return open_built(cache.child(chosen.kind, chosen.key), **options)
    matches = [(kind, key) for kind in kinds for key in entry_names(cache.child(kind), kind) if key.startswith(target)]
    if len(matches) == 1:
        return open_built(cache.child(*matches[0]), **options)
    listed = ", ".join(sorted(kinds)) or f"nothing: {cache} holds no entries"
    if matches:
        found = ", ".join(f"{kind}/{key[:12]}" for kind, key in matches[:5])
        raise LookupError(f"{target!r} matches several entries in {cache} ({found}): give more of the key")
    raise LookupError(f"no built dataset {target!r} in {cache}: give a built kind or a cache key (prefix); it holds "
                      f"{listed}")


def _built_entries(kind_dir: Location, kind: str, shards: ShardCache) -> list[Entry]:
    """The complete built entries in ``kind_dir`` (their files fetched into ``shards``), manifests read (folders not
    whole yet, or not entries: skipped)."""
    entries = []
    for key in entry_names(kind_dir, kind):
        try:
            manifest = parse_manifest(read_bytes(kind_dir.child(key, MANIFEST), what="a manifest"), kind, key)
        except (RemoteFileMissingError, BrokenManifestError):
            continue
        if is_built(entry := UrlFiles(kind_dir.child(key), shards).entry(manifest)):
            entries.append(entry)
    return entries
