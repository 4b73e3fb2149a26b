"""A built dataset read where it lies: in object storage or over HTTP (`open_built`, `find_remote_built`).

``gf.open_built("s3://bucket/data/cache/scenes/<key>")`` returns a `RemoteBuiltDataset`, a
`~glyphforge.builds.dataset.BuiltDataset` with the same API (``len``, ``ds[i]``, ``take``,
iteration, ``stream``, ``export``, ``arrays``...), which reads the entry at its URL:

* Its manifest is read once, and checked as on disk; its ``index.npy`` is fetched once
  (whole, sha256 checked) into the local shard cache.
* A shard is one byte range of the data file holding it (``arrays.pklz``, or the part
  ``meta["parts"]`` names for an entry built into object storage): ``ds[i]`` and ``take``
  fetch only the ranges of the shards they need, into the local shard cache
  (`glyphforge.storage.shard_cache`), and decode them from there. So the second read of a
  shard (the second epoch) is local.
* ``ds.stream(...)`` tells the dataset which shards its next windows hold
  (`BuiltDataset.prefetch`): they are fetched on a few threads (``prefetch_threads``) while
  the current ones are decoded, in runs of consecutive shards (`ShardRuns`) when the entry
  fits in half the cache, each run by one process of the machine at a time (DataLoader
  workers fetch it once between them). Fetched shards are files in the cache, not bytes in memory.
* Reads are retried on transient failures; a lost file, refused credentials or a server
  that keeps failing raise errors naming the URL, the shard and what to do
  (`glyphforge.storage.reads`).

A remote dataset pickles as a handle: the URL, the storage options without secrets, the
local cache dir and the reader's settings. A DataLoader worker (or a Dask task) opens the
entry again with its own environment's credentials.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from glyphforge._checks import PathLike, check_int
from glyphforge._files import writing
from glyphforge.builds.dataset import BuiltDataset, is_built
from glyphforge.builds.index import INDEX_FILE, DamagedIndexError, ShardIndex
from glyphforge.builds.members import Member
from glyphforge.builds.shard_fetch import CachedEntry, Piece, ShardFetcher, ShardRuns, continues_run
from glyphforge.cache import CorruptPklzError
from glyphforge.cache.entry import read_entry
from glyphforge.cache.lookup import of_kind, split_target
from glyphforge.cache.manifest import MANIFEST, BrokenManifestError, is_plain_name, parse_manifest, read_manifest
from glyphforge.errors import ArgumentError
from glyphforge.storage.location import Location, parse_place
from glyphforge.storage.reads import RemoteFileMissingError, read_bytes
from glyphforge.storage.remote_entry import (
    BrokenRemoteEntryError,
    RemoteEntry,
    damaged_at_url,
    entry_location,
    entry_names,
)
from glyphforge.storage.shard_cache import ShardCache

__all__ = ["DEFAULT_PREFETCH_THREADS", "RemoteBuiltDataset", "UnlistableDataDirError",
           "find_remote_built", "open_built"]

T = TypeVar("T")
#: Threads fetching a stream's next shards ahead (0: none, every shard is fetched when it is read).
DEFAULT_PREFETCH_THREADS = 4


class UnlistableDataDirError(ArgumentError, LookupError):
    """A kind or key prefix was given for a data dir that cannot be listed (over HTTP): give kind/key instead."""


class RemoteBuiltDataset(BuiltDataset):
    """A `BuiltDataset` whose entry is at a URL (see the module docstring); open one with `open_built`.

    ``ds.url`` is the entry's URL; ``ds.path`` its folder in the local shard cache.
    """

    entry: CachedEntry

    def __init__(self, entry: CachedEntry, *, prefetch_threads: int = DEFAULT_PREFETCH_THREADS,
                 fetcher: ShardFetcher | None = None, **options: Any) -> None:
        with writing(entry.path):
            entry.path.mkdir(parents=True, exist_ok=True)
        super().__init__(entry, **options)
        self.prefetch_threads = check_int("prefetch_threads", prefetch_threads, 0)
        self._fetcher = fetcher or ShardFetcher(entry, self.prefetch_threads)

    @property
    def url(self) -> str:
        """The entry's URL (what `open_built` takes)."""
        return self.entry.remote.url

    @property
    def index(self) -> ShardIndex:
        """The shard index (`BuiltDataset.index`), its ``index.npy`` fetched into the local shard cache.

        A local copy damaged since it was fetched is fetched again, once. An index that does not
        read or fit as the manifest at the URL records it is the damage of the entry there: its
        local copy is removed, and a `BrokenRemoteEntryError` says what to do at the URL
        (`damaged_at_url`).
        """
        try:
            return super().index
        except DamagedIndexError as error:
            if not self.entry.drop_damaged_copy(INDEX_FILE):
                raise self._damaged_index(error) from None
        try:
            return super().index
        except DamagedIndexError as error:
            raise self._damaged_index(error) from None

    def _damaged_index(self, error: DamagedIndexError) -> BrokenRemoteEntryError:
        """Remove the local copy of the rejected index (glyphforge fetched it: nothing rejected is kept); the error."""
        (self.path / INDEX_FILE).unlink(missing_ok=True)
        return BrokenRemoteEntryError(f"the {self.entry.kind} entry at {self.url}: {error.problem}, as its manifest "
                                      f"there records it; its local copy was removed. {damaged_at_url(self.url)}")

    def _member(self, number: int) -> tuple[Path, int]:
        """Shard ``number``'s gzip member: its byte range, fetched into the shard cache (unless there), from byte 0."""
        return self._fetcher.path(self._piece(number)), 0

    def _read(self, number: int, read: Callable[[Member], T]) -> T:
        """Read shard ``number`` from its cached copy; a copy that does not decode is removed and fetched again
        once (damaged again: the entry at the URL is, and nothing of it is kept), as is one another process evicted
        between its fetch and its reading."""
        try:
            return super()._read(number, read)
        except RemoteFileMissingError:
            raise
        except (CorruptPklzError, FileNotFoundError):
            self._fetcher.forget(self._piece(number))
        try:
            return super()._read(number, read)
        except CorruptPklzError as error:
            self._fetcher.forget(self._piece(number))
            raise CorruptPklzError(
                f"shard {number} of the {self.entry.kind} entry at {self.url} is damaged: fetched twice, its bytes do "
                f"not decode ({error.__cause__ or error}); nothing of it is kept in the local cache. "
                f"{damaged_at_url(self.url)}") from None

    def _piece(self, number: int) -> Piece:
        return self._shard_runs().pieces[number]

    def prefetch(self, shards: Iterable[int]) -> None:
        """Start fetching ``shards`` into the local shard cache on the prefetch threads (see the module docstring).

        Each shard comes with its run of consecutive shards (`ShardRuns`) when the whole entry
        fits in half the shard cache: what an epoch reads in all, in fewer, larger requests.
        """
        layout = self._shard_runs()
        wanted = dict.fromkeys(layout.run_of[int(shard)] for shard in shards)  # in the order asked
        self._fetcher.prefetch(layout.runs[run] for run in wanted)

    def _shard_runs(self) -> ShardRuns:
        """Every shard's piece and run, worked out once (the dataset's readers share them through their fetcher)."""
        if self._fetcher.runs is None:
            index = self.index
            pieces = [Piece(number, self._member_name(number), offset, length) for number, (offset, length) in
                      enumerate(zip(index.offset.tolist(), index.length.tolist(), strict=True))]
            alone = self.entry.size_bytes > self.entry.cache.size // 2
            runs: list[list[Piece]] = []
            for piece in pieces:
                if runs and not alone and continues_run(runs[-1], piece):
                    runs[-1].append(piece)
                else:
                    runs.append([piece])
            run_of = [position for position, run in enumerate(runs) for _ in run]
            self._fetcher.runs = ShardRuns(pieces, run_of, runs)
        return self._fetcher.runs

    def _sibling(self, **settings: Any) -> RemoteBuiltDataset:
        return RemoteBuiltDataset(self.entry, prefetch_threads=self.prefetch_threads, fetcher=self._fetcher,
                                  **settings)

    def close(self) -> None:
        """Stop the prefetch threads and let the entry go (see `BuiltDataset.close`)."""
        self._fetcher.close()
        super().close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a handle: the URL and storage options (without secrets), the cache options and the settings.

        The local cache dir and size are pickled as given: given none, the process unpickling uses its own default.
        """
        settings = {**self.entry.cache.options, "prefetch_threads": self.prefetch_threads,
                    "cache_shards": self.cache_shards, "arrays_limit": self.arrays_limit,
                    "random_access": self.random_access, "decoded_budget": self.decoded_budget}
        return _reopen_remote, (self.entry.remote.location, self.key, settings)

    def __repr__(self) -> str:
        return (f"<BuiltDataset {self.entry.kind} {self.key[:12]} at {self.url}: {len(self)} examples, "
                f"arrays {list(self.layout)}>")


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
        A `RemoteBuiltDataset` for a URL.

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
    remote = _open_entry(location)
    cache = ShardCache(cache_dir, cache_size)
    entry = CachedEntry(cache.folder(remote.kind, remote.key), remote.manifest, remote, cache)
    return RemoteBuiltDataset(entry, prefetch_threads=prefetch_threads, **options)


def _open_entry(location: Location) -> RemoteEntry:
    """The built entry at ``location``; a LookupError saying what is there otherwise."""
    parts = location.url.rstrip("/").rsplit("/", 3)
    if len(parts) < 4 or parts[1] != "cache" or not (is_plain_name(parts[2]) and is_plain_name(parts[3])):
        raise LookupError(f"{location} is not the URL of an entry: an entry's URL is <data dir URL>/cache/<kind>/"
                          "<key>. To find the entry of a kind in a data dir at a URL, use "
                          "glyphforge.builds.find_built(kind, data_dir=URL)")
    remote = RemoteEntry.open(location)
    if remote is None:
        raise LookupError(f"no built dataset at {location}: it has no {MANIFEST} (not published or built there yet, "
                          "still being written, or a wrong URL). Check the URL, or find the entries of its data dir "
                          "with glyphforge.builds.find_built(kind, data_dir=<data dir URL>)")
    if not is_built(remote):
        raise LookupError(f"the {remote.kind} entry at {location} is not a built dataset (it has no shard layout)")
    return remote


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


def find_remote_built(target: str, data_dir: Location, **options: Any) -> BuiltDataset:
    """Return the built dataset ``target`` of the data dir at the URL ``data_dir`` (see `find_built`).

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
        return open_built(entry_location(data_dir, kind, key), **options)
    if data_dir.read_only:
        raise UnlistableDataDirError(
            f"{data_dir} cannot be listed (over {data_dir.scheme.upper()} there is no listing), so {target!r} cannot "
            "be looked up there: give the entry as kind/key with its whole key (e.g. scenes/<key>), or its URL to "
            "glyphforge.open_built")
    cache = data_dir.child("cache")
    kinds = entry_names(cache)
    kind = split_target(target)[0]
    if kind in kinds and (chosen := of_kind(target, _built_entries(cache.child(kind), kind), cache)) is not None:
        return open_built(chosen.location, **options)
    matches = [(kind, key) for kind in kinds for key in entry_names(cache.child(kind), kind) if key.startswith(target)]
    if len(matches) == 1:
        return open_built(cache.child(*matches[0]), **options)
    listed = ", ".join(sorted(kinds)) or f"nothing: {cache} holds no entries"
    if matches:
        found = ", ".join(f"{kind}/{key[:12]}" for kind, key in matches[:5])
        raise LookupError(f"{target!r} matches several entries in {cache} ({found}): give more of the key")
    raise LookupError(f"no built dataset {target!r} in {cache}: give a built kind or a cache key (prefix); it holds "
                      f"{listed}")


def _built_entries(kind_dir: Location, kind: str) -> list[RemoteEntry]:
    """The complete built entries in ``kind_dir``, manifests read (folders not whole yet, or not entries: skipped)."""
    entries = []
    for key in entry_names(kind_dir, kind):
        try:
            manifest = parse_manifest(read_bytes(kind_dir.child(key, MANIFEST), what="a manifest"), kind, key)
        except (RemoteFileMissingError, BrokenManifestError):
            continue
        if is_built(entry := RemoteEntry(kind_dir.child(key), manifest)):
            entries.append(entry)
    return entries


def _reopen_remote(location: Location, key: str, settings: dict[str, Any]) -> BuiltDataset:
    """Open the remote dataset again (unpickling), checking it is still entry ``key``."""
    dataset = open_built(location, **settings)
    if dataset.key != key:
        raise LookupError(f"the entry at {location} is {dataset.key[:12]}, not the pickled dataset's {key[:12]}")
    return dataset
