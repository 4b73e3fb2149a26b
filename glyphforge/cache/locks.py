"""File locks that say who holds them, and a visible, bounded wait for them.

glyphforge's one implementation of "wait for another process doing the same work": the
cache store takes one per key (``<root>/<kind>/.<key>.lock``), and downloads one per file
(``<dir>/.<filename>.lock``, see :mod:`glyphforge.pipelines.download`).

A lock is a `filelock.FileLock`. Whoever acquires it records itself beside it, in
``<lock>.holder`` (pid, host, start time in ISO 8601 UTC, as JSON), and removes the
record before releasing. Both files follow the umask (filelock >= 3.24 creates a lock
file with ``0o666`` less the umask; the record is an `atomic_path`), so in a data dir a
group shares (umask 002) any member takes a lock, replaces or removes a record that
another member left. A process that finds the lock held logs who holds it at once
and then every `LOG_INTERVAL` seconds (logger ``glyphforge.cache.locks``, INFO: the
``glyphforge`` commands show it), and gives up after its timeout
(:func:`glyphforge.config.lock_timeout`) with a `LockTimeoutError` naming the lock file,
the holder and what to do. No wait is silent: after `WARN_AFTER` seconds one line says
who holds the lock at WARNING, which Python prints to stderr even where logging was
never configured (a library user's script).

Readers of a cache entry hold a `ReadLock`: a shared ``flock`` on the entry's readers
file, ``<root>/<kind>/.<key>.readers`` (`readers_path`), for as long as they use it.
Taking it sets the file's modification time to now: that is the entry's last use, which
`glyphforge cache gc --max-size` evicts by (least recently used first). Eviction takes
the same lock exclusively without waiting (`exclusive`) and leaves an entry alone when
it cannot: some process is reading it. These locks need POSIX ``flock``; where there is
none (Windows) readers take none and eviction refuses to run.
"""
from __future__ import annotations

import errno
import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import filelock

from glyphforge import config
from glyphforge._files import atomic_path, writing
from glyphforge.errors import AccessError

try:
    import fcntl
except ImportError:  # Windows: no flock; see the module docstring
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "HOLDER_SUFFIX", "LOG_INTERVAL", "READERS_SUFFIX", "WARN_AFTER", "Holder", "LockTimeoutError", "ReadLock",
    "exclusive", "hold", "holder_path", "read_holder", "readers_path",
]

log = logging.getLogger(__name__)

#: Seconds between two "waiting for another process" log lines.
LOG_INTERVAL = 10.0
#: Seconds of waiting after which one line says who holds the lock at WARNING (then INFO again).
WARN_AFTER = 5.0
HOLDER_SUFFIX = ".holder"
READERS_SUFFIX = ".readers"


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its holder record says: ``pid`` on ``host`` since ``since`` (ISO 8601, UTC)."""

    pid: int
    host: str
    since: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}, since {self.since}"

    def gone(self) -> bool:
        """Return True when the holder ran on this host and is no longer running."""
        if self.host != socket.gethostname() or os.name != "posix":  # elsewhere signal 0 is no probe
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # it runs, as another user
            return False
        return False


class LockTimeoutError(AccessError, TimeoutError):
    """Another process held a lock for longer than the timeout; the message says what to do.

    Attributes
    ----------
    lock_path
        The lock file.
    holder
        Who holds it, from its holder record (None when there is none).
    """

    def __init__(self, message: str, *, lock_path: Path | None = None, holder: Holder | None = None) -> None:
        super().__init__(message)
        self.lock_path = lock_path
        self.holder = holder


def holder_path(lock_path: Path) -> Path:
    """Return the path of the holder record of the lock file ``lock_path``."""
    return lock_path.with_name(lock_path.name + HOLDER_SUFFIX)


def read_holder(lock_path: Path) -> Holder | None:
    """Return the holder recorded beside ``lock_path``, or None (no record, or not one glyphforge wrote)."""
    try:
        record = json.loads(holder_path(lock_path).read_text(encoding="utf-8"))
        holder = Holder(record["pid"], record["host"], record["since"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    fields_ok = isinstance(holder.pid, int) and isinstance(holder.host, str) and isinstance(holder.since, str)
    return holder if fields_ok else None


def _record_holder(lock_path: Path) -> None:
    record = {"pid": os.getpid(), "host": socket.gethostname(),
              "since": datetime.now(UTC).isoformat(timespec="seconds")}
    with atomic_path(holder_path(lock_path)) as temporary:
        temporary.write_text(json.dumps(record), encoding="utf-8")


def _try_acquire(lock: filelock.FileLock, lock_path: Path, timeout: float) -> bool:
    """Acquire ``lock`` within ``timeout`` seconds; False if another process keeps it."""
    try:
        with writing(lock_path):  # the lock file is created on first use: a full or read-only disk says so
            lock.acquire(timeout=timeout)
    except filelock.Timeout:
        return False
    return True


def _timeout_message(lock_path: Path, what: str, waited: float, holder: Holder | None, detail: str) -> str:
    record = holder_path(lock_path)
    detail = f" ({detail})" if detail else ""
    longer = f"wait longer with lock_timeout= or ${config.ENV_LOCK_TIMEOUT} (seconds; inf waits for ever)"
    if holder is None:
        body = (f"{lock_path} is held by a process that left no holder record (a glyphforge older than 0.2, or a "
                f"process just starting){detail}. If it is still {what}, wait for it, or {longer}; if it is stuck, "
                f"end it (`fuser {lock_path}` names it); if no process is {what} any more, remove {lock_path}. "
                "Then run again.")
    elif holder.gone():
        body = (f"{lock_path} is held, but its holder record names {holder}, which is no longer running on this "
                f"host (a process it started may hold the lock){detail}. End any process it left behind, or remove "
                f"{lock_path} and {record}, and run again.")
    else:
        body = (f"{lock_path} is held by {holder}{detail}. If that process is still {what}, wait for it, or "
                f"{longer}; if it is stuck (stopped with Ctrl-Z or SIGSTOP, or hung), end it (`kill {holder.pid}` "
                f"on {holder.host}): the lock is freed when its holder exits; if it is gone, remove {lock_path} and "
                f"{record}. Then run again.")
    return f"gave up waiting for another process {what} after {waited:.1f} s: {body}"


@contextmanager
def hold(
    lock: filelock.FileLock,
    what: str,
    timeout: float,
    *,
    detail: Callable[[], str] | None = None,
) -> Iterator[None]:
    """Hold ``lock`` for the block, waiting at most ``timeout`` seconds for another holder.

    Reentrant, as ``lock`` is: a thread already holding it enters at once. The outermost
    hold records this process as the holder and removes the record on leaving.

    Parameters
    ----------
    lock
        The lock; its file's directory must exist.
    what
        What a holder is doing, for messages: ``"preparing <kind> <key12>"``,
        ``"fetching <dataset>/<file>"`` ("waiting for another process <what> ...").
    timeout
        Seconds to wait (0: give up at once; ``inf``: wait for ever), normally
        :func:`glyphforge.config.lock_timeout`.
    detail
        Called while waiting, for more to say about the holder's progress (such as
        ``"f.bin.part has 12.0 MB"``; ``""``: nothing); it must not raise.

    Raises
    ------
    LockTimeoutError
        When another process still holds the lock after ``timeout`` seconds.
    StorageError
        When the lock file or the holder record cannot be written.
    """
    lock_path = Path(lock.lock_file)
    outermost = not lock.is_locked  # by this thread: the lock's state is per thread
    if not _try_acquire(lock, lock_path, 0):
        started = time.monotonic()
        warned = False
        while True:
            waited = time.monotonic() - started
            holder = read_holder(lock_path)
            more = detail() if detail is not None else ""
            if waited >= timeout:
                message = _timeout_message(lock_path, what, waited, holder, more)
                raise LockTimeoutError(message, lock_path=lock_path, holder=holder)
            warn = not warned and waited >= WARN_AFTER
            warned = warned or warn
            limit = "no time limit" if math.isinf(timeout) else f"giving up after {timeout:g} s"
            log.log(logging.WARNING if warn else logging.INFO,
                    "waiting for another process %s (%s): %.0f s so far%s; %s", what,
                    holder or "holder not recorded", waited, f", {more}" if more else "", limit)
            next_line = LOG_INTERVAL if warned else min(LOG_INTERVAL, WARN_AFTER - waited)
            if _try_acquire(lock, lock_path, min(next_line, timeout - waited)):
                break
    try:
        if outermost:
            _record_holder(lock_path)
        yield
    finally:
        try:
            if outermost:
                holder_path(lock_path).unlink(missing_ok=True)
        finally:
            lock.release()


def readers_path(entry_dir: Path) -> Path:
    """Return the readers file of the cache entry in ``entry_dir``: ``<root>/<kind>/.<key>.readers``."""
    return entry_dir.with_name(f".{entry_dir.name}{READERS_SUFFIX}")


def _open_lock_file(path: Path) -> int | None:
    """Open (creating, under the umask) the lock file ``path``; read-only where this user may not write; else None."""
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags, 0o666)
        except OSError:
            continue
    return None


class ReadLock:
    """A shared lock on a cache entry, held by a reader while it uses the entry (see the module docstring).

    ``acquire`` waits only while an eviction holds the entry (it removes it, briefly) and
    marks the entry used; ``release`` (or leaving a ``with`` block) lets it go. Where the
    readers file can neither be created nor opened (a read-only cache) no lock is taken:
    nobody can evict there either.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the shared lock (nothing when it is held already, or without ``flock``)."""
        if fcntl is None or self._fd is not None:
            return
        fd = _open_lock_file(self.path)
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:  # a file system without locks (some NFS mounts: ENOLCK): read unlocked, as without flock
            os.close(fd)
            return
        try:
            os.utime(fd)
        except OSError:  # another user's file, read-only: used, but not marked
            pass
        self._fd = fd

    def release(self) -> None:
        """Let the lock go (closing the file releases it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ReadLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()


@contextmanager
def exclusive(path: Path) -> Iterator[bool]:
    """Try to take the lock file ``path`` exclusively without waiting; yield whether it was taken (held in the block).

    Raises
    ------
    OSError
        Where there is no ``flock`` (Windows): readers take no lock there, so whether an
        entry is in use cannot be known.
    """
    if fcntl is None:
        raise OSError(errno.ENOSYS, "evicting cache entries needs POSIX file locks (flock), which this system "
                      "lacks, to know which entries are in use; remove entries with `glyphforge cache rm KEY`")
    fd = _open_lock_file(path)
    if fd is None:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a reader (EWOULDBLOCK), or no locks on this file system: not known to be unused
            yield False
        else:
            yield True
    finally:
        os.close(fd)
