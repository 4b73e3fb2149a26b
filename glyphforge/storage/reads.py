"""Reading bytes at a URL: one object whole or one byte range of it, retried, bounded, with clear errors.

`read_bytes` is the one way glyphforge reads a remote object (a manifest, an index, a shard's
byte range); `object_size` asks its size, `list_names` lists a folder of a store. ``http://`` and ``https://`` are read
with ``requests`` (a core dependency: no aiohttp needed), so an answer is checked before its
body is read: a range must come back as ``206 Partial Content`` starting at the byte asked
for, and a server that ignores ``Range`` (``200`` with the whole file) is refused rather than
downloaded whole. Every other scheme (``s3://``, ``gs://``, ``file://``) is read with fsspec's
ranged ``cat_file``, which fetches exactly the range (no read-ahead).

Transient failures (a dropped connection, a timeout, HTTP 408, 429 and 5xx, S3's throttling)
are retried `ReadPolicy.attempts` times with exponential backoff (a ``Retry-After`` is
honoured, up to ``max_delay``), each retry logged at INFO; on ``gs://`` gcsfs retries them
itself, and glyphforge does not again (`_RETRYING_CLIENTS`). Then, or at once for what retrying
cannot fix, an error names the URL, what was read, what failed and what to do:

* `RemoteFileMissingError` (a ``FileNotFoundError``): no such object, or no such bucket (404; ``no_bucket``);
* `RemoteAccessError` (a ``PermissionError``): the credentials were refused (401, 403);
* `ShortObjectError` (a `RemoteReadError`): the object ends before the range asked for;
* `RemoteReadError` (an ``OSError``): anything else, transient failures included once retried.

Messages never hold credentials: only the URL (query strings are cut) and the server's status.
"""
from __future__ import annotations

import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import requests

from glyphforge._checks import check_int, check_real
from glyphforge.errors import AccessError, IntegrityError
from glyphforge.storage.read_failures import Permanent, Short, Transient, reason, shown, sorted_failure, status_failure

if TYPE_CHECKING:
    from glyphforge.storage.location import Location

__all__ = ["DEFAULT_POLICY", "ReadPolicy", "RemoteAccessError", "RemoteFileMissingError", "RemoteReadError",
           "ShortObjectError", "is_missing_bucket", "list_names", "object_size", "read_bytes", "store_call"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
#: What gcsfs's FileNotFoundError holds for a 404 on a bucket's own resource (listing its objects, uploading
#: one): ``b/<bucket>/o``, alone or at the end of the API URL. A 404 on one object (``.../b/<bucket>/o/<name>``)
#: does not say whether the bucket exists.
_GCS_BUCKET_RESOURCE = re.compile(r"(?:^|/)b/[^/]+/o$")
#: Schemes whose 404 on one object does not say whether its bucket exists (gcsfs names the object's resource):
#: a read that gets one spends one listing more to tell (`_bucket_is_missing`). s3fs says so in words.
_UNSURE_404 = frozenset({"gs"})
#: Schemes whose fsspec filesystem retries transient failures itself before raising them, and its name (gcsfs:
#: 6 tries over about 35 s): glyphforge does not try again, or a store that is down would take minutes to name.
_RETRYING_CLIENTS = {"gs": "gcsfs"}
#: The most bytes a whole-object read (a manifest, a request record) takes, from any store.
WHOLE_LIMIT = 256 << 20
_CHUNK = 1 << 16


@dataclass(frozen=True)
class ReadPolicy:
    """How hard to try one read.

    Attributes
    ----------
    attempts
        Tries before giving up on a transient failure (1: no retry).
    backoff
        Seconds to wait after the first failure, doubled after each further one (with jitter).
    max_delay
        The longest wait between two tries, a server's Retry-After included.
    timeout
        Seconds allowed to connect, and between two pieces of an answer (HTTP).
    """

    attempts: int = 5
    backoff: float = 0.5
    max_delay: float = 30.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        check_int("ReadPolicy.attempts", self.attempts, 1)
        for name in ("backoff", "max_delay", "timeout"):
            check_real(f"ReadPolicy.{name}", getattr(self, name), 0.0, float("inf"))

    def delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait after ``failures`` failures in a row (the server's ``retry_after`` when it gave one)."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        return min(self.backoff * 2 ** (failures - 1) * random.uniform(0.8, 1.2), self.max_delay)


DEFAULT_POLICY = ReadPolicy()


class RemoteReadError(AccessError, OSError):
    """A remote object could not be read (the message says what failed and what to do)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ShortObjectError(RemoteReadError, IntegrityError):
    """The object ends before the range asked for: it is not the object expected (damaged, or replaced)."""


class RemoteFileMissingError(AccessError, FileNotFoundError):
    """The object (or its bucket: ``no_bucket``) does not exist: retrying cannot help."""

    def __init__(self, message: str, no_bucket: bool = False) -> None:
        super().__init__(message)
        self.no_bucket = no_bucket

    def __str__(self) -> str:
        return str(self.args[0])


class RemoteAccessError(AccessError, PermissionError):
    """The store refused the credentials (or has none for this process): retrying cannot help."""

    def __str__(self) -> str:
        return str(self.args[0])


def read_bytes(location: Location, start: int | None = None, end: int | None = None, *, what: str = "",
               policy: ReadPolicy = DEFAULT_POLICY) -> bytes:
    """Return bytes ``[start, end)`` of the object at ``location``, or all of it when both are None.

    Parameters
    ----------
    location
        The object's URL and storage options.
    start, end
        The range to read (both or neither).
    what
        What the bytes are, for messages (e.g. ``"shard 7 of the entry at s3://..."``).
    policy
        Retries and timeouts.

    Raises
    ------
    RemoteFileMissingError, RemoteAccessError, RemoteReadError
        See the module docstring; each names the URL, what failed and what to do.
    """
    ranged = start is not None and end is not None
    span = f"bytes {start:,} to {end:,} of " if ranged else ""
    described = f"{span}{shown(location.url)}" + (f" ({what})" if what else "")
    if location.scheme in ("http", "https"):
        return _retried(lambda: _http(location.url, start, end, policy.timeout), f"read {described}", policy)
    return _retried(lambda: _fsspec(location, start, end), f"read {described}", policy, location.scheme)


def list_names(location: Location, *, policy: ReadPolicy = DEFAULT_POLICY) -> list[str]:
    """Return the sorted names in the folder at ``location`` (none when it does not exist), fresh from the store.

    Retried and failing as `read_bytes` does (a missing bucket is a `RemoteFileMissingError`).
    """
    def attempt() -> list[str]:
        fs = location.fs
        fs.invalidate_cache(location.path)
        try:
            paths = _classified(lambda: fs.ls(location.path, detail=False))
        except FileNotFoundError as error:
            if is_missing_bucket(error):
                raise
            return []
        return sorted(str(path).rstrip("/").rsplit("/", 1)[-1] for path in paths)

    return _retried(attempt, f"list {shown(location.url)}", policy, location.scheme)


def object_size(location: Location, *, what: str = "", policy: ReadPolicy = DEFAULT_POLICY) -> int | None:
    """Return the size of the object at ``location`` as its store says it (None: an HTTP server that does not say):
    one ``HEAD`` over HTTP, fsspec's ``info`` (fresh) otherwise; retried and failing as `read_bytes` does."""
    described = f"find the size of {shown(location.url)}" + (f" ({what})" if what else "")
    if location.scheme not in ("http", "https"):
        return _retried(lambda: int(_classified(lambda: location.fs.info(location.path, refresh=True)["size"])),
                        described, policy, location.scheme)

    def head() -> int | None:
        try:
            with _session().head(location.url, headers={"Accept-Encoding": "identity"}, allow_redirects=True,
                                 timeout=(policy.timeout, policy.timeout)) as response:
                _check_status(response)
                length = response.headers.get("Content-Length", "")
        except (requests.ConnectionError, requests.Timeout) as error:
            raise Transient(f"the connection failed ({type(error).__name__})") from None
        return int(length) if length.isdigit() else None

    return _retried(head, described, policy)


def store_call(location: Location, call: Callable[[], T], described: str, *,
               policy: ReadPolicy = DEFAULT_POLICY) -> T:
    """Return ``call()``, an fsspec call on the store of ``location`` (a listing, a multi-object ``cat``, a
    streamed read), retried and failing as `read_bytes` does; ``described`` says what it does ("list s3://...")."""
    return _retried(lambda: _classified(call), described, policy, location.scheme)


def is_missing_bucket(error: FileNotFoundError) -> bool:
    """Whether the store's ``error`` says the bucket itself does not exist (not only an object of it).

    s3fs says so in words ("The specified bucket does not exist"); gcsfs names the API resource that
    was not found, a bucket's when a listing or an upload got the 404 (see `_GCS_BUCKET_RESOURCE`);
    a read of one ``gs://`` object that got a 404 asks with one listing more (`_bucket_is_missing`).
    Never the bucket's name: a bucket may well be called ``my-bucket``.
    """
    if isinstance(error, _NoBucket):
        return True
    text = str(error.args[0]) if error.args else ""
    return "bucket does not exist" in str(error).lower() or _GCS_BUCKET_RESOURCE.search(text.split("?")[0]) is not None


def _retried(attempt: Callable[[], T], described: str, policy: ReadPolicy, scheme: str = "") -> T:
    """Return ``attempt()``, tried again on transient failures; the errors of the module docstring otherwise.

    ``described`` is what is done, for messages ("read bytes 0 to 9 of s3://..."); ``scheme`` the store's
    (tried once when its client retries itself: `_RETRYING_CLIENTS`).
    """
    client = _RETRYING_CLIENTS.get(scheme)
    attempts = 1 if client else policy.attempts
    failures = 0
    while True:
        try:
            return attempt()
        except Transient as error:
            failures += 1
            if failures >= attempts:
                tries = f"after {client}'s own retries" if client else f"{failures} times in a row"
                raise RemoteReadError(
                    f"could not {described}: {error.why}, {tries}. The store or the network "
                    "is failing: try again later, or check the URL and the connection") from None
            pause = policy.delay(failures, error.retry_after)
            log.info("could not %s (%s); trying again in %.1f s (attempt %d of %d)", described, error.why, pause,
                     failures + 1, policy.attempts)
            time.sleep(pause)
        except FileNotFoundError as error:
            no_bucket = is_missing_bucket(error)
            missing = "the bucket does not exist" if no_bucket else "there is no such object"
            raise RemoteFileMissingError(f"could not {described}: {missing}. It was deleted, or the URL is wrong: "
                                         "check it", no_bucket) from None
        except PermissionError as error:
            raise RemoteAccessError(
                f"could not {described}: access was refused ({reason(error)}). The credentials this process has "
                "are wrong or missing: set them as the store's SDK reads them (e.g. AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, ~/.aws, GOOGLE_APPLICATION_CREDENTIALS), or pass storage_options") from None
        except Permanent as error:
            raise (ShortObjectError if isinstance(error, Short) else RemoteReadError)(
                f"could not {described}: {error}") from None


# -- HTTP, with requests -------------------------------------------------------------------
_sessions = threading.local()


def _session() -> requests.Session:
    """This thread's session (kept-alive connections; a session is not shared between threads or processes)."""
    session = getattr(_sessions, "session", None)
    if session is None:
        session = _sessions.session = requests.Session()
    return session


def _forget_sessions() -> None:
    """In a forked child (a DataLoader worker): drop the parent's sessions, whose sockets the parent still uses."""
    global _sessions
    _sessions = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sessions)


def _http(url: str, start: int | None, end: int | None, timeout: float) -> bytes:
    """One GET of ``url`` (bytes ``[start, end)`` with a Range header), its answer checked."""
    headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"} \
        if start is not None and end is not None else {"Accept-Encoding": "identity"}
    try:
        with _session().get(url, headers=headers, stream=True, timeout=(timeout, timeout)) as response:
            _check_status(response)
            expected = _expected_length(response, start, end)
            return _body(response, expected)
    except requests.exceptions.ChunkedEncodingError:
        raise Transient("the connection was closed before the whole answer came") from None
    except (requests.ConnectionError, requests.Timeout) as error:
        raise Transient(f"the connection failed ({type(error).__name__})") from None


def _check_status(response: requests.Response) -> None:
    """Raise what an answer that is not 200 or 206 means."""
    if response.status_code not in (200, 206):
        raise status_failure(response.status_code, f"{response.status_code} {response.reason}",
                              _retry_after(response))


def _expected_length(response: requests.Response, start: int | None, end: int | None) -> int | None:
    """How many body bytes the answer must hold (None: a whole object); refuses an answer to another range."""
    if start is None or end is None:
        return None
    if response.status_code == 200:
        size = response.headers.get("Content-Length", "unknown")
        raise Permanent(
            f"the server ignores Range requests (it answered 200 with the whole file, {size} bytes), so every read "
            "would download the whole file. Serve the data from a server that supports Range (any static file "
            "server or object store does), or copy the entry to a local data dir and read it there")
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
    if match is None or int(match.group(1)) != start:
        raise Permanent(f"the server answered a range other than the one asked for "
                        f"(Content-Range {response.headers.get('Content-Range')!r})")
    if int(match.group(2)) + 1 < end:
        raise Short(f"the file ends at byte {int(match.group(2)) + 1:,}: it is shorter than expected (damaged, or "
                     "replaced by another)")
    return end - start


def _body(response: requests.Response, expected: int | None) -> bytes:
    """Read the body: exactly ``expected`` bytes (a dropped connection is transient), else at most `WHOLE_LIMIT`."""
    limit = WHOLE_LIMIT if expected is None else expected
    pieces, size = [], 0
    for piece in response.iter_content(_CHUNK):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise Permanent(f"the server sent more than the {limit:,} bytes expected")
    if expected is not None and size != expected:
        raise Transient(f"the connection was closed after {size:,} of {expected:,} bytes")
    return b"".join(pieces)


def _retry_after(response: requests.Response) -> float | None:
    """The answer's Retry-After in seconds (a number or an HTTP date), None without one."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


# -- everything else, with fsspec ------------------------------------------------------------
def _fsspec(location: Location, start: int | None, end: int | None) -> bytes:
    """One ranged ``cat_file`` of the object (or a whole read of at most `WHOLE_LIMIT` bytes), its failures sorted
    into transient and not."""
    try:
        data: bytes = _classified(lambda: location.fs.cat_file(location.path, start=start, end=end)
                                  if start is not None else _whole(location))
    except FileNotFoundError as error:
        if location.scheme in _UNSURE_404 and not is_missing_bucket(error) and _bucket_is_missing(location):
            raise _NoBucket(f"{shown(location.url)}: the bucket does not exist") from None
        raise
    if start is not None and end is not None and len(data) != end - start:
        raise Short(f"the object gave {len(data):,} bytes for a range of {end - start:,}: it is shorter than "
                     "expected (damaged, or replaced by another)")
    return data


def _whole(location: Location) -> bytes:
    """The object's bytes, refused past `WHOLE_LIMIT` before more is read (its size as the store says it, fresh)."""
    location.fs.invalidate_cache(location.path)
    with location.fs.open(location.path, "rb") as stream:
        data: bytes = stream.read(WHOLE_LIMIT + 1)
    if len(data) > WHOLE_LIMIT:
        raise Permanent(f"the object holds more than the {WHOLE_LIMIT:,} bytes a whole read takes")
    return data


class _NoBucket(FileNotFoundError):
    """The bucket of the object read does not exist (`_bucket_is_missing` found out)."""


def _bucket_is_missing(location: Location) -> bool:
    """Whether the bucket of the object at ``location`` does not exist, by one listing of the object's folder.

    For a store whose 404 on one object does not say (`_UNSURE_404`); a listing that fails
    otherwise (no permission to list, the network) cannot tell: False.
    """
    fs = location.fs
    folder = location.path.rsplit("/", 1)[0]
    try:
        fs.invalidate_cache(folder)
        fs.ls(folder, detail=False)
    except FileNotFoundError as error:
        return is_missing_bucket(error)
    except Exception:  # noqa: BLE001 (the object's own 404 stands)
        return False
    return False


def _classified(call: Callable[[], T]) -> T:
    """Return ``call()`` (an fsspec call), its failures sorted by `sorted_failure`."""
    try:
        return call()
    except Exception as error:
        failure = sorted_failure(error)
        if failure is error:
            raise
        raise failure from None
