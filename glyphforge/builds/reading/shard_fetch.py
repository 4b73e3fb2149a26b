"""Shards of a built entry at a URL, fetched into this machine's shard cache (the remote reader's storage).

An entry at a URL is read as the one `glyphforge.cache.Entry`: its manifest is the remote one,
its folder is in the local shard cache and its data files are fetched there
(`glyphforge.cache.remote.files.UrlFiles`). A shard is one byte range of the data file
holding it (a `Piece`); `ShardFetcher` fetches pieces ahead on a few threads, in runs of
consecutive shards (`ShardRuns`) of at most `RUN_BYTES`, each run by one process of the
machine at a time (DataLoader workers fetch it once between them).
"""
from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import filelock

from glyphforge import config
from glyphforge.cache import Entry
from glyphforge.cache.locks import hold
from glyphforge.cache.remote.files import UrlFiles
from glyphforge.urls import redacted

__all__ = ["RUN_BYTES", "Piece", "ShardFetcher", "ShardRuns", "continues_run"]

#: The most bytes of consecutive shards fetched ahead with one ranged read.
RUN_BYTES = 8 << 20


class Piece(NamedTuple):
    """Shard ``number``'s gzip member: ``length`` bytes at ``offset`` of the entry's data file ``name``."""

    number: int
    name: str
    offset: int
    length: int


class ShardRuns(NamedTuple):
    """A remote entry's shards as pieces, and grouped into runs to fetch ahead with one ranged read each.

    A run is consecutive shards of one data file, adjacent in it, of at most `RUN_BYTES`
    together; each shard is a run of its own when the entry is over half the shard cache
    (a run's other shards would be evicted before they are read).
    """

    pieces: list[Piece]
    """Shard ``number``'s piece is ``pieces[number]``."""
    run_of: list[int]
    """Shard ``number`` is in the run ``runs[run_of[number]]``."""
    runs: list[list[Piece]]


def continues_run(run: list[Piece], piece: Piece) -> bool:
    """Whether ``piece`` extends ``run``: the same data file, right after it, the run staying within `RUN_BYTES`."""
    last = run[-1]
    return (piece.name == last.name and piece.offset == last.offset + last.length
            and piece.offset + piece.length - run[0].offset <= RUN_BYTES)


class ShardFetcher:
    """Fetches shards' byte ranges of one remote entry into the shard cache: when read, or ahead on a thread pool.

    Ahead, a run of consecutive shards of one data file is fetched with one ranged read
    and cut into shard files. The pool is made on the first `prefetch` and dropped by
    `close`, by garbage collection, and in a forked child (a DataLoader worker makes its own).
    """

    def __init__(self, entry: Entry, files: UrlFiles, threads: int) -> None:
        self.entry = entry
        self.files = files
        self.threads = threads
        self.runs: ShardRuns | None = None
        """The readers' `RemoteShards._shard_runs`, worked out once."""
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.RLock()  # a done callback may run at once, under it
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[Path, Future[None]] = {}
        self._fetched: set[Piece] = set()  # the first shards of runs this process found whole in the cache

    def _in_this_process(self) -> None:
        """Forget a parent's pool and its fetches after a fork (their threads are not in this process)."""
        if self._pid != os.getpid():
            self._start()

    def _path(self, piece: Piece) -> Path:
        return self.files.cache.shard_path(self.entry.kind, self.entry.key, piece.name, piece.offset, piece.length)

    def path(self, piece: Piece) -> Path:
        """The cached file of shard ``piece``: fetched now, unless cached or on its way (then waited for)."""
        self._in_this_process()
        path = self._path(piece)
        with self._lock:
            ahead = self._pending.get(path)
        if ahead is not None:
            try:
                ahead.result()
            except Exception:  # noqa: BLE001 (fetched again below: its error is raised in this thread)
                pass
        return self.files.cache.shard(path, piece.length, lambda: self.files.read_range(
            self.entry, piece.name, piece.offset, piece.length, what=f"shard {piece.number}"))

    def forget(self, piece: Piece) -> None:
        """Remove the cached file of shard ``piece`` (one that does not decode)."""
        self._path(piece).unlink(missing_ok=True)

    def _fetch_run(self, run: list[Piece]) -> None:
        """Fetch the shards of ``run`` not cached yet with one ranged read, into their shard files.

        One process at a time per run (a lock file in the entry's folder): DataLoader workers,
        which all read every window, fetch each run once between them.
        """
        lock_path = self.entry.path / f".{run[0].name}.{run[0].offset}.run.lock"
        what = f"shards {run[0].number} to {run[-1].number}"
        doing = f"fetching {what} of {redacted(self.files.url)}"
        with hold(filelock.FileLock(lock_path), doing, config.lock_timeout()):
            missing = [piece for piece in run if not self.files.cache.cached(self._path(piece), piece.length)]
            if not missing:
                return  # another process fetched them
            first, last = missing[0], missing[-1]
            begin = first.offset
            data = memoryview(self.files.read_range(self.entry, first.name, begin,
                                                    last.offset + last.length - begin, what=what))
            for piece in run[run.index(first):run.index(last) + 1]:
                part = data[piece.offset - begin:piece.offset - begin + piece.length]
                self.files.cache.shard(self._path(piece), piece.length, part.tobytes)

    def prefetch(self, runs: Iterable[list[Piece]]) -> None:
        """Start fetching ``runs`` (lists of consecutive shards of one data file), but shards cached or under way."""
        self._in_this_process()
        if not self.threads:
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="glyphforge-prefetch")
            for run in runs:
                paths = [self._path(piece) for piece in run]
                if run[0] in self._fetched or any(path in self._pending for path in paths):
                    continue  # whole (a shard evicted since is fetched alone when it is read), or on its way
                if all(self.files.cache.cached(path, piece.length) for path, piece in zip(paths, run, strict=True)):
                    self._fetched.add(run[0])
                    continue
                future = self._pool.submit(self._fetch_run, run)
                for path in paths:
                    self._pending[path] = future
                future.add_done_callback(functools.partial(self._done, paths))

    def _done(self, paths: list[Path], future: Future[None]) -> None:
        with self._lock:
            for path in paths:
                if self._pending.get(path) is future:
                    del self._pending[path]

    def close(self) -> None:
        """Cancel the fetches not started and let the pool's threads end (a later `prefetch` makes a new pool)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._pending.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
