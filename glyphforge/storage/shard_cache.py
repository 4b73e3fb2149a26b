"""`ShardCache`: this machine's copies of the pieces of remote entries it read, with a size limit.

Layout, under the local cache dir (`glyphforge.DataContext.local_cache`: ``cache_dir=``,
else ``$GLYPHFORGE_CACHE_DIR``, else the user cache dir)::

    shards/<kind>/<key>/<data file>.<offset>-<length>.shard   # one shard's gzip member, as the entry holds it
    shards/<kind>/<key>/index.npy                             # a small data file, whole (its sha256 checked)

Keyed by kind and key, not by URL: entries are content-addressed, so the same entry read
from two URLs is one copy. Every file is written atomically (a temporary file beside it,
renamed; modes follow the umask), so a reader finds a whole file or none, and processes
sharing the cache (DataLoader workers, ranks on one machine) need no lock to stay correct: two
fetching the same shard write the same bytes (a reader of runs of shards takes a lock per run
only so as not to download them twice: `glyphforge.builds.reading.lookup`). A shard file is used only
when its length is the one its index records (its gzip CRC is checked when it is decoded).

Size limit: ``cache_size=`` (bytes, or text such as ``"20GB"``), else
``$GLYPHFORGE_CACHE_SIZE``, else :data:`DEFAULT_CACHE_SIZE` or a tenth of the disk holding
the cache, whichever is smaller. Past it, the least recently used shard files (by
modification time, refreshed on each use) are removed until the cache is at 90% of the
limit. Only ``*.shard`` files of this layout are ever removed: nothing else under the cache
dir, and never a whole data file (they are small). A process reading a shard another
process just evicted fetches it again.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from glyphforge import config
from glyphforge._checks import PathLike
from glyphforge._files import atomic_path, writing
from glyphforge.textfmt import human_size, parse_size

__all__ = ["DEFAULT_CACHE_SIZE", "ShardCache", "default_cache_size"]

log = logging.getLogger(__name__)

#: The size limit without ``cache_size=`` or ``$GLYPHFORGE_CACHE_SIZE`` (or a tenth of the disk, if smaller).
DEFAULT_CACHE_SIZE = 20 * 10**9
#: The part of the disk the default limit may take at most.
DISK_FRACTION = 0.1
#: Eviction goes down to this part of the limit, so the next shards do not each start another.
EVICT_TO = 0.9
SHARDS = "shards"
_SHARD_FILE = re.compile(r"^[^/\\]+\.\d+-\d+\.shard$")
_FIX = ("give the local cache another directory (cache_dir=, or $GLYPHFORGE_CACHE_DIR) or a smaller "
        "cache_size ($GLYPHFORGE_CACHE_SIZE)")


def default_cache_size(root: Path) -> int:
    """The size limit for a shard cache in ``root``: ``$GLYPHFORGE_CACHE_SIZE``, else the default (see above)."""
    chosen = config.cache_size_setting()
    if chosen is not None:
        return chosen
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), root.anchor or "/")
    return min(DEFAULT_CACHE_SIZE, int(shutil.disk_usage(existing).total * DISK_FRACTION))


class ShardCache:
    """The shard cache under ``<local cache>/shards`` (see the module docstring).

    Parameters
    ----------
    local_cache
        The local cache dir (None: ``$GLYPHFORGE_CACHE_DIR``, else the user cache dir; see
        `glyphforge.config.local_cache_dir`).
    size
        The size limit in bytes (or text such as ``"20GB"``); None: `default_cache_size`, read when a
        write first needs it (a cache only listed or read never reads ``$GLYPHFORGE_CACHE_SIZE``).
    """

    def __init__(self, local_cache: PathLike | None = None, size: int | str | None = None) -> None:
        self.root = config.local_cache_dir(local_cache) / SHARDS
        self._size = None if size is None else parse_size(size)
        self.options = {"cache_dir": None if local_cache is None else str(local_cache), "cache_size": size}
        """What it was opened with: a process unpickling a dataset opens its own with these (its own defaults)."""
        self._used: int | None = None  # bytes of shard files, counted at the first write, then kept up
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """The size limit in bytes."""
        if self._size is None:
            self._size = default_cache_size(self.root)
        return self._size

    def folder(self, kind: str, key: str) -> Path:
        """Where the pieces of entry ``kind``/``key`` are kept."""
        return self.root / kind / key

    def shard_path(self, kind: str, key: str, name: str, offset: int, length: int) -> Path:
        """The file of bytes ``[offset, offset + length)`` of data file ``name`` of entry ``kind``/``key``."""
        return Path(f"{self.root}/{kind}/{key}/{name}.{offset}-{length}.shard")  # one Path made: a stream asks often

    def cached(self, path: Path, length: int) -> bool:
        """Whether ``path`` holds a whole piece of ``length`` bytes (then marked as just used)."""
        try:
            if os.stat(path).st_size != length:
                return False
        except OSError:  # absent
            return False
        try:
            os.utime(path)  # the eviction's "recently used"
        except OSError:  # evicted meanwhile (the reader fetches it again), or a cache this user may only read
            pass
        return True

    def shard(self, path: Path, length: int, fetch: Callable[[], bytes]) -> Path:
        """Return ``path`` (a `shard_path`) holding its ``length`` bytes, fetching them with ``fetch`` unless cached.

        Raises
        ------
        ValueError
            ``fetch`` gave another number of bytes (nothing is kept).
        StorageError
            The cache dir cannot be written (full, read-only, forbidden): the message says what to do.
        """
        if self.cached(path, length):
            return path
        data = fetch()
        if len(data) != length:
            raise ValueError(f"{len(data):,} bytes came for {path.name}, which holds {length:,}: nothing was kept")
        self._write(path, lambda temporary: temporary.write_bytes(data))
        self._added(length)
        return path

    def whole(self, path: Path, size: int, fetch: Callable[[Path], object]) -> Path:
        """Return ``path``, a whole data file of ``size`` bytes, written by ``fetch(temporary path)`` unless there."""
        try:
            if path.stat().st_size == size:
                return path
        except OSError:
            pass
        self._write(path, fetch)
        return path

    def _write(self, path: Path, fill: Callable[[Path], object]) -> None:
        """Write ``path`` atomically with ``fill(temporary path)``, storage errors saying what to do."""
        with writing(path, _FIX):
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary:
            fill(temporary)

    def _added(self, length: int) -> None:
        """Count a new shard file; evict when past the limit."""
        with self._lock:
            if self._used is None:
                self._used = sum(size for _, size, _ in self._shard_files())
            else:
                self._used += length
            if self._used > self.size:
                self._used = self._evict()

    def _shard_files(self) -> Iterator[tuple[Path, int, float]]:
        """Every shard file of the cache: path, size and last use (files of any other name are not ours)."""
        for kind in _folders(self.root):
            for entry in _folders(kind):
                try:
                    children = list(os.scandir(entry))
                except OSError:
                    continue
                for child in children:
                    if not _SHARD_FILE.match(child.name):
                        continue
                    try:
                        if child.is_file(follow_symlinks=False):
                            stat = child.stat(follow_symlinks=False)
                            yield Path(child.path), stat.st_size, stat.st_mtime
                    except OSError:  # removed meanwhile
                        continue

    def _evict(self) -> int:
        """Remove the least recently used shard files until at `EVICT_TO` of the limit; return the bytes left."""
        files = sorted(self._shard_files(), key=lambda item: item[2])
        used = sum(size for _, size, _ in files)
        target = int(self.size * EVICT_TO)
        removed = 0
        for path, size, _ in files:
            if used <= target:
                break
            try:
                path.unlink()
            except FileNotFoundError:  # another process evicted it
                pass
            used -= size
            removed += size
        if removed:
            log.debug("shard cache %s: removed %s of least recently used shards (limit %s)",
                                              self.root, human_size(removed), human_size(self.size))
        return used

    def __repr__(self) -> str:
        return f"<ShardCache {self.root}, limit {human_size(self.size)}>"


def _folders(parent: Path) -> list[Path]:
    """The sub-directories of ``parent`` (not symlinks); none when it cannot be listed."""
    try:
        return [Path(entry.path) for entry in os.scandir(parent) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
