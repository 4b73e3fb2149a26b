"""`RemoteShards`: the shard source of a built entry at a URL, each shard's byte range read into the shard cache.

* The entry's manifest is read once, and checked as on disk; its ``index.npy`` and
  ``blocks.npy`` are fetched once (whole, sha256 checked) into the local shard cache.
* A shard is one byte range of the data file holding it (``arrays.pklz``, or the part
  ``meta["parts"]`` names for an entry built into object storage): a read fetches only the
  ranges of the shards it needs, into the local shard cache (`glyphforge.storage.shard_cache`),
  and decodes them from there. So the second read of a shard (the second epoch) is local.
* `RemoteShards.prefetch` (what a stream tells of its next windows) fetches shards on a few
  threads (``prefetch_threads``) while the current ones are decoded, in runs of consecutive
  shards (`ShardRuns`) when the entry fits in half the cache, each run by one process of the
  machine at a time (DataLoader workers fetch it once between them).
* Reads are retried on transient failures; a lost file, refused credentials or a server
  that keeps failing raise errors naming the URL, the shard and what to do
  (`glyphforge.storage.reads`).

It pickles as a handle: the URL, the storage options without secrets, the local cache dir
and ``prefetch_threads``; a DataLoader worker (or a Dask task) opens the entry again with its
own environment's credentials.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from glyphforge._checks import PathLike, check_int
from glyphforge._files import writing
from glyphforge.builds.reading.blocks import BLOCKS_FILE, BlockTable
from glyphforge.builds.reading.index import INDEX_FILE, DamagedIndexError, ShardIndex
from glyphforge.builds.reading.members import Member
from glyphforge.builds.reading.protocols import entry_blocks, entry_index, member_name, read_member
from glyphforge.builds.reading.shard_fetch import Piece, ShardFetcher, ShardRuns, continues_run
from glyphforge.cache import DamagedPklzError, Entry
from glyphforge.cache.manifest import MANIFEST, is_built, is_plain_name
from glyphforge.cache.remote.files import DamagedRemoteEntryError, UrlFiles, damaged_at_url
from glyphforge.storage.location import Location
from glyphforge.storage.reads import RemoteFileMissingError
from glyphforge.storage.shard_cache import ShardCache
from glyphforge.urls import redacted

__all__ = ["DEFAULT_PREFETCH_THREADS", "RemoteShards", "open_remote"]

T = TypeVar("T")
#: Threads fetching a stream's next shards ahead (0: none, every shard is fetched when it is read).
DEFAULT_PREFETCH_THREADS = 4


class RemoteShards:
    """The shard source (a `ShardSource`) of the built entry at a URL (see the module doc).

    ``entry.path`` is the entry's folder in the local shard cache, ``files`` its data files
    (``entry.data_files``: read by range, or fetched there); `open_remote` makes one.
    """

    def __init__(self, entry: Entry, files: UrlFiles, prefetch_threads: int = DEFAULT_PREFETCH_THREADS,
                 fetcher: ShardFetcher | None = None) -> None:
        self.entry = entry
        self.files = files
        self.prefetch_threads = check_int("prefetch_threads", prefetch_threads, 0)
        self._fetcher = fetcher or ShardFetcher(entry, files, self.prefetch_threads)
        self._index: ShardIndex | None = None
        self._blocks: BlockTable | None = None

    @property
    def url(self) -> str:
        """The entry's URL (what `glyphforge.open_built` takes)."""
        return self.files.url

    @property
    def index(self) -> ShardIndex:
        """The shard index, its ``index.npy`` fetched into the local shard cache (`_checked`)."""
        if self._index is None:
            self._index = self._checked(INDEX_FILE, lambda: entry_index(self.entry))
        return self._index

    @property
    def blocks(self) -> BlockTable:
        """Where each block of each shard is, its ``blocks.npy`` fetched into the local shard cache (`_checked`)."""
        if self._blocks is None:
            self._blocks = self._checked(BLOCKS_FILE, lambda: entry_blocks(self.entry, self.index))
        return self._blocks

    def _checked(self, name: str, load: Callable[[], T]) -> T:
        """``load()`` of the data file ``name`` (the index or block table), fetched into the local shard cache.

        A local copy damaged since it was fetched is fetched again, once. One that does not
        read or fit as the manifest at the URL records it is the damage of the entry there: its
        local copy is removed, and a `DamagedRemoteEntryError` says what to do at the URL
        (`damaged_at_url`).
        """
        try:
            return load()
        except DamagedIndexError as error:
            if not self.files.drop_damaged_copy(self.entry, name):
                raise self._damaged_index(name, error) from None
        try:
            return load()
        except DamagedIndexError as again:
            raise self._damaged_index(name, again) from None

    def _damaged_index(self, name: str, error: DamagedIndexError) -> DamagedRemoteEntryError:
        """Remove the local copy of the rejected data file ``name`` (glyphforge fetched it: nothing rejected is kept);
        the error."""
        (self.entry.path / name).unlink(missing_ok=True)
        return DamagedRemoteEntryError(f"the {self.entry.kind} entry at {redacted(self.url)}: {error.problem}, as its "
                                       f"manifest there records it; its local copy was removed. "
                                       f"{damaged_at_url(self.url)}")

    def read(self, number: int, read: Callable[[Member], T]) -> T:
        """Read shard ``number`` from its cached copy; a copy that does not decode is removed and fetched again
        once (damaged again: the entry at the URL is, and nothing of it is kept), as is one another process evicted
        between its fetch and its reading."""
        try:
            return read_member(self.entry, self.index, self.blocks, number, self._member, read)
        except RemoteFileMissingError:
            raise
        except DamagedIndexError as error:  # its blocks lie: the copy of blocks.npy is the manifest's (sha256 checked)
            raise self._damaged_index(BLOCKS_FILE, error) from None
        except (DamagedPklzError, FileNotFoundError):
            self._fetcher.forget(self._piece(number))
        try:
            return read_member(self.entry, self.index, self.blocks, number, self._member, read)
        except DamagedPklzError as error:
            self._fetcher.forget(self._piece(number))
            raise DamagedPklzError(
                f"shard {number} of the {self.entry.kind} entry at {redacted(self.url)} is damaged: fetched twice, its "
                f"bytes do not decode ({error.__cause__ or error}); nothing of it is kept in the local cache. "
                f"{damaged_at_url(self.url)}") from None

    def _member(self, number: int) -> tuple[Path, int]:
        """Shard ``number``'s gzip member: its byte range, fetched into the shard cache (unless there), from byte 0."""
        return self._fetcher.path(self._piece(number)), 0

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
        """Every shard's piece and run, worked out once (the entry's readers share them through their fetcher)."""
        if self._fetcher.runs is None:
            index = self.index
            pieces = [Piece(number, member_name(self.entry, index, number), offset, length) for number, (offset, length)
                      in enumerate(zip(index.offset.tolist(), index.length.tolist(), strict=True))]
            alone = self.entry.size_bytes > self.files.cache.size // 2
            runs: list[list[Piece]] = []
            for piece in pieces:
                if runs and not alone and continues_run(runs[-1], piece):
                    runs[-1].append(piece)
                else:
                    runs.append([piece])
            run_of = [position for position, run in enumerate(runs) for _ in run]
            self._fetcher.runs = ShardRuns(pieces, run_of, runs)
        return self._fetcher.runs

    def sibling(self) -> RemoteShards:
        """A source of the same entry for another reader: its own index, the same fetcher (and prefetch threads)."""
        return RemoteShards(self.entry, self.files, self.prefetch_threads, self._fetcher)

    def close(self) -> None:
        """Stop the prefetch threads (a later prefetch starts new ones)."""
        self._fetcher.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a handle: the URL and storage options (without secrets), the cache options, ``prefetch_threads``.

        The local cache dir and size are pickled as given: given none, the process unpickling uses its own default.
        """
        options = {**self.files.cache.options, "prefetch_threads": self.prefetch_threads}
        return _reopen_remote, (self.files.location, self.entry.key, options)


def open_remote(location: Location, *, cache_dir: PathLike | None = None, cache_size: int | str | None = None,
                prefetch_threads: int = DEFAULT_PREFETCH_THREADS) -> RemoteShards:
    """The shard source of the built entry at ``location``, its shards cached in ``cache_dir`` (see `open_built`).

    The entry's folder in the shard cache is made now: the reader fetches into it (a cache dir that cannot
    be written fails here, saying what to do).

    Raises
    ------
    LookupError
        ``location`` is not an entry's URL, or holds no built dataset (the message says what is there).
    """
    files = UrlFiles(location, ShardCache(cache_dir, cache_size))
    return _shards(_open_entry(files), files, prefetch_threads)


def open_read(entry: Entry, *, cache_size: int | str | None = None,
              prefetch_threads: int = DEFAULT_PREFETCH_THREADS) -> RemoteShards:
    """The shard source of ``entry``, a built entry at a URL whose checked manifest was just read (the listing of its
    data dir) or written (its build): it is not read again. Its shards are cached in the shard cache of its files
    (`UrlFiles`; ``cache_size`` given: one of that size, in the same cache dir): see `open_remote`."""
    files = entry.data_files
    assert isinstance(files, UrlFiles), "an entry at a URL has its files there"
    if cache_size is not None:
        cache_dir = files.cache.options["cache_dir"]
        assert cache_dir is None or isinstance(cache_dir, str), "a shard cache's options name its cache dir"
        files = UrlFiles(files.location, ShardCache(cache_dir, cache_size))
        entry = files.entry(entry.manifest)
    return _shards(entry, files, prefetch_threads)


def _shards(entry: Entry, files: UrlFiles, prefetch_threads: int) -> RemoteShards:
    """The shard source of ``entry``, its folder in the shard cache made now (see `open_remote`)."""
    with writing(entry.path):
        entry.path.mkdir(parents=True, exist_ok=True)
    return RemoteShards(entry, files, prefetch_threads)


def _open_entry(files: UrlFiles) -> Entry:
    """The built entry at ``files.location``; a LookupError saying what is there otherwise."""
    location = files.location
    parts = location.url.rstrip("/").rsplit("/", 3)
    if len(parts) < 4 or parts[1] != "cache" or not (is_plain_name(parts[2]) and is_plain_name(parts[3])):
        raise LookupError(f"{location} is not the URL of an entry: an entry's URL is <data dir URL>/cache/<kind>/"
                          "<key>. To find the entry of a kind in a data dir at a URL, use "
                          "glyphforge.find_built(kind, data_dir=URL)")
    entry = files.open()
    if entry is None:
        raise LookupError(f"no built dataset at {location}: it has no {MANIFEST} (not published or built there yet, "
                          "still being written, or a wrong URL). Check the URL, or find the entries of its data dir "
                          "with glyphforge.find_built(kind, data_dir=<data dir URL>)")
    if not is_built(entry):
        raise LookupError(f"the {entry.kind} entry at {location} is not a built dataset (it has no shard layout)")
    return entry


def _reopen_remote(location: Location, key: str, options: dict[str, Any]) -> RemoteShards:
    """Open the entry at ``location`` again (unpickling), checking it is still entry ``key``."""
    source = open_remote(location, **options)
    if source.entry.key != key:
        raise LookupError(f"the entry at {location} is {source.entry.key[:12]}, not the pickled dataset's {key[:12]}")
    return source
