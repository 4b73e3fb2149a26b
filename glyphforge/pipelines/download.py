"""Resumable, verified, mirrored downloads: the only code in glyphforge that uses the network.

``fetch(resource, dest_dir)`` makes ``<dest_dir>/<resource.filename>`` exist with the
pinned hash, and never leaves a wrong or partial file there:

1. a file already in place with the right hash is returned at once, with no network
   (that is how files placed by hand on offline clusters are used). One with the wrong
   hash was not written by glyphforge (it only renames verified downloads into place):
   it is the user's, so it is neither deleted nor overwritten, and
   :class:`HashMismatchError` says to pass ``verify=False`` (``--no-verify``) to use it
   as a custom copy, or to move it away to have upstream's file downloaded;
2. otherwise, under a per-file lock (other processes wait, saying whom for, up to
   ``lock_timeout``, then reuse the result; see :mod:`glyphforge.cache.locks`),
   each source is tried in order: the ``mirrors`` given, the mirrors in
   ``$GLYPHFORGE_MIRROR``, then the origin URL (see :mod:`glyphforge.pipelines.sources`);
3. a source is streamed into ``<filename>.part`` (an HTTP one resumed with a Range request
   when the server supports it; one in object storage read through fsspec from byte 0, with
   the credentials the provider's SDK finds in the environment), verified against the hash,
   and renamed into place. A resumed
   file that does not verify is downloaded once more from byte 0 before the source fails;
   a ``.part`` file with the wrong hash (glyphforge's own download) is deleted. A
   download renamed into place leaves a record (``.<filename>.record``, see
   :mod:`glyphforge.cache.raw`) saying glyphforge wrote it, so ``glyphforge cache gc
   --raw`` may remove it and never removes a file placed by hand.

HTTP requests have connect and read timeouts; connection errors, timeouts, 408, 429 and
5xx are retried with exponential backoff honouring Retry-After (not a host name that does not resolve:
see `no_network_advice`), an answer slower than a minimum rate gives up on the source, and so does a deadline;
each retry, and a download still unfinished, is logged at INFO.
A ``text/html`` answer is refused at once. A full disk raises
:class:`~glyphforge.errors.StorageError` naming the ``.part`` file, which is kept for a
resume. In offline mode (``offline=True`` or ``$GLYPHFORGE_OFFLINE=1``) only local
mirrors (directories, ``file://``) are consulted: object storage (``s3://``, ``gs://``) is
the network, as HTTP is. Every failure raises
:class:`DownloadError` (or :class:`HashMismatchError`) listing each source tried and why,
and the exact path where the file may be placed by hand.

The transfer from one HTTP source lives in :mod:`glyphforge.pipelines.http_source` (retried under
:class:`glyphforge.storage.retries.RetryPolicy`, the policy of every store's reads too), the sources and the copy
from a local or object storage one in
:mod:`glyphforge.pipelines.sources`, and `Resource` and the errors in :mod:`glyphforge.pipelines.resource`.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import filelock

from glyphforge import config
from glyphforge._version import __version__
from glyphforge.cache.locks import LockTimeoutError, hold
from glyphforge.cache.raw import record_download
from glyphforge.hashes import check_hash
from glyphforge.pipelines.http_source import Attempt, Fetched, _SourceFailed, download, no_network_advice
from glyphforge.pipelines.resource import DownloadError, HashMismatchError, Resource, not_upstream
from glyphforge.pipelines.sources import Source, copy_local, copy_remote, sources
from glyphforge.storage.retries import DEFAULT_POLICY, RetryPolicy
from glyphforge.textfmt import human_size
from glyphforge.urls import redacted

if TYPE_CHECKING:
    import requests

__all__ = ["fetch"]

log = logging.getLogger(__name__)


def fetch(
    resource: Resource,
    dest_dir: str | os.PathLike[str],
    *,
    mirrors: Iterable[str | os.PathLike[str]] | str | None = (),
    progress: bool = True,
    offline: bool | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    lock_timeout: float | None = None,
) -> Path:
    """Make ``<dest_dir>/<resource.filename>`` exist with the right hash, and return its path.

    Parameters
    ----------
    resource
        The file to get.
    dest_dir
        Its directory, normally ``glyphforge.config.raw_dir(resource.dataset)``; created if needed.
    mirrors
        Mirror bases (URLs or directories; a string is split on spaces) tried in order
        before the origin, followed by those in ``$GLYPHFORGE_MIRROR``.
    progress
        Show a tqdm byte progress bar.
    offline
        Forbid network access (only files in place and local mirrors); None reads
        ``$GLYPHFORGE_OFFLINE``.
    policy
        Retries, backoff, timeouts, minimum rate and deadline for each HTTP source.
    lock_timeout
        Seconds to wait while another process fetches the same file (``inf``: for ever);
        None reads ``$GLYPHFORGE_LOCK_TIMEOUT``, else an hour (see
        :func:`glyphforge.config.lock_timeout`).

    Returns
    -------
    Path
        The verified file.

    Raises
    ------
    HashMismatchError
        When a file with the wrong hash is already in place (kept as it is; no source is
        tried), or a source delivered wrong content (deleted) and no source delivered the
        right one.
    DownloadError
        When no source delivered the file (the message says where to place it by hand), or
        when another process held the file's lock for longer than ``lock_timeout``.
    StorageError
        When the partial file cannot be written (disk full, read-only, forbidden); it is
        kept, so that running again resumes.
    ValueError
        When a mirror is not a URL or directory glyphforge can read, or ``lock_timeout``
        is not a number >= 0.
    """
    timeout = config.lock_timeout(lock_timeout)
    dest_dir = Path(dest_dir).expanduser()
    target = dest_dir / resource.filename
    if _in_place(target, resource):
        return target
    offline = config.offline_setting(offline)
    tried, mirror_names = sources(resource, mirrors, offline)
    with ExitStack() as locked:
        try:
            dest_dir.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(dest_dir / f".{resource.filename}.lock")
            locked.enter_context(hold(lock, f"fetching {resource.dataset}/{resource.filename}", timeout,
                                      detail=_part_size(_part_path(target))))
        except LockTimeoutError as error:  # before OSError: a TimeoutError is one
            raise DownloadError(str(error), resource=resource, target=target, mirrors=mirror_names) from None
        except OSError as error:
            raise DownloadError(
                f"cannot write to {dest_dir} ({error}). Place {resource.filename} there by hand "
                f"({target}), or choose a writable data directory with GLYPHFORGE_DATA_DIR.",
                resource=resource, target=target, mirrors=mirror_names,
            ) from error
        return _fetch_locked(resource, target, tried, mirror_names, offline, policy, progress)


def _fetch_locked(
    resource: Resource,
    target: Path,
    tried: list[Source],
    mirror_names: tuple[str, ...],
    offline: bool,
    policy: RetryPolicy,
    progress: bool,
) -> Path:
    """Try each source in turn, holding the per-file lock."""
    import requests  # here, not at the top: importing it costs ~0.1 s, and most runs download nothing

    if _in_place(target, resource):
        return target  # another process fetched it while we waited
    attempts: list[Attempt] = []
    part = _part_path(target)
    with requests.Session() as session:
        session.headers["User-Agent"] = f"glyphforge/{__version__} (+python-requests)"
        for source in tried:
            try:
                _get_verified(source, part, resource, session, policy, progress)
            except _SourceFailed as failure:
                attempts.append(failure.attempt)
                continue
            try:
                os.replace(part, target)
            except OSError:  # something was put in its place meanwhile: named, and the download not left behind
                part.unlink(missing_ok=True)
                if os.path.lexists(target) and not target.is_file():
                    raise _in_the_way(target, resource) from None
                raise
            # what glyphforge wrote (`cache gc --raw` may remove it), and from where (a record: no secret in it)
            record_download(target, resource.hash, redacted(source.location))
            return target
    raise _failure(resource, target, mirror_names, tuple(attempts), offline)


def _part_path(target: Path) -> Path:
    return target.with_name(f"{target.name}.part")


def _part_size(part: Path) -> Callable[[], str]:
    """What a process waiting for the lock says of the holder's progress: how large ``part`` is so far."""
    def detail() -> str:
        try:
            return f"{part.name} has {human_size(part.stat().st_size)}"
        except OSError:  # not started yet, or finished
            return ""
    return detail


def _in_place(target: Path, resource: Resource) -> bool:
    """Whether ``target`` is already the pinned file; raise if a file that is not (the user's), or a directory, is
    there."""
    if os.path.lexists(target) and not target.is_file():
        raise _in_the_way(target, resource)
    if not target.is_file():
        return False
    if _verified(target, resource):
        return True
    raise not_upstream(
        target, resource, check_hash(target, resource.hash)[1],
        "glyphforge leaves it as it is: it never deletes or overwrites a file it did not download itself. To use "
        "it as your own copy, pass verify=False (on the command line: --no-verify); to have glyphforge download "
        f"upstream's file instead, move it away (e.g. to {target.name}.mine) and run again.",
    )


def _in_the_way(target: Path, resource: Resource) -> DownloadError:
    """The error for ``target``'s place taken by what is no file (a directory, a dangling link): never replaced."""
    what = "a directory" if target.is_dir() else "a symbolic link to nothing" if target.is_symlink() else "no file"
    reason = (f"{target} is {what}, where the file {resource.filename} goes: glyphforge never replaces what it did "
              "not write, so it fetched nothing. Move it away and run again")
    return DownloadError(f"cannot fetch {resource.dataset}/{resource.filename}: {reason}.", resource=resource,
                         target=target, attempts=(Attempt(str(target), reason),))


def _verified(path: Path, resource: Resource) -> bool:
    if resource.size is not None and path.stat().st_size != resource.size:
        return False
    return check_hash(path, resource.hash)[0]


def _get_verified(
    source: Source, part: Path, resource: Resource, session: requests.Session, policy: RetryPolicy, progress: bool
) -> None:
    if source.path is not None:
        copy_local(source.path, part, resource, progress)
        _check_part(part, resource, source.location, final_url=None)
        return
    if source.remote is not None:
        copy_remote(source.remote, part, resource, progress)
        _check_part(part, resource, source.location, final_url=None)
        return
    fetched = _download(source.location, part, resource, session, policy, progress)
    try:
        _check_part(part, resource, source.location, fetched.final_url)
    except _SourceFailed as failure:
        if not fetched.resumed:
            raise
        log.warning("%s: the resumed file did not verify (%s); downloading it again from byte 0",
                    redacted(source.location), failure.attempt.reason)
        fetched = _download(source.location, part, resource, session, policy, progress)  # the bad .part was deleted
        _check_part(part, resource, source.location, fetched.final_url)


def _download(
    url: str, part: Path, resource: Resource, session: requests.Session, policy: RetryPolicy, progress: bool
) -> Fetched:
    label = f"{resource.dataset}/{resource.filename}"
    return download(url, part, size=resource.size, label=label, session=session, policy=policy, progress=progress)


def _check_part(part: Path, resource: Resource, location: str, final_url: str | None) -> None:
    ok, actual = check_hash(part, resource.hash)
    if not ok:
        raise _SourceFailed(_reject(part, resource, source=location, final_url=final_url, actual=actual))


def _reject(part: Path, resource: Resource, *, source: str, final_url: str | None, actual: str) -> Attempt:
    """Delete ``part``, glyphforge's own download with the wrong content (hash ``actual``), and describe it."""
    size = part.stat().st_size
    part.unlink()
    expected_size = f"{resource.size} bytes" if resource.size is not None else "not pinned"
    redirected = f"; final URL after redirects: {final_url}" if final_url and final_url != source else ""
    reason = (
        f"wrong content: expected {resource.hash}, got {actual}; expected size {expected_size}, "
        f"got {size} bytes{redirected}; the bad download was deleted"
    )
    return Attempt(source, reason, actual_hash=actual, actual_size=size, final_url=final_url or None)


def _failure(
    resource: Resource, target: Path, mirrors: tuple[str, ...], attempts: tuple[Attempt, ...], offline: bool
) -> DownloadError:
    lines = [f"could not get {resource.dataset}/{resource.filename} ({resource.hash}) from {resource.url}."]
    if offline:
        lines.append(
            "Offline mode (GLYPHFORGE_OFFLINE=1 or offline=True) forbids network access: "
            "only the file in place and local mirrors (directories, file://) were consulted; HTTP and object "
            "storage (s3://, gs://) mirrors are the network."
        )
    no_mirror = "none (offline, only directory and file:// mirrors are tried)" if offline else (
        "none (set GLYPHFORGE_MIRROR or use --mirror)")
    tried = ", ".join(mirrors) if mirrors else no_mirror
    lines.append(f"Mirrors tried: {tried}")
    lines += [f"  - {attempt.source}: {attempt.reason}" for attempt in attempts]
    if not attempts:
        lines.append("  (no local source to try)")
    lines += no_network_advice(attempts, resource.dataset, target.parent)
    first_step = (
        "unset GLYPHFORGE_OFFLINE and run again on a machine with network access"
        if offline else "check the network (and the mirrors) and run again"
    )
    lines.append(
        f"What to do: {first_step}, or download {resource.url} yourself and place the file at:\n"
        f"  {target}\nA file placed there is used without network access when its hash matches (or, with "
        "verify=False or --no-verify, as your own copy)."
    )
    error_type = HashMismatchError if any(attempt.actual_hash for attempt in attempts) else DownloadError
    return error_type("\n".join(lines), resource=resource, target=target, mirrors=mirrors, attempts=attempts)
