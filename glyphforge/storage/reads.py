"""Reading bytes at a URL: one object whole or one byte range of it, retried, bounded, with clear errors.

`read_bytes` is the one way glyphforge reads a remote object (a manifest, an index, a shard's
byte range); `object_size` asks its size, `list_names` lists a folder of a store, `store_call`
runs any other call on a store. Each is done by the URL's backend (`Location.backend`, from
the table of schemes: `glyphforge.storage.backends`): ``http://`` and ``https://`` with
``requests`` (a range must come back as ``206 Partial Content``: a server that ignores ``Range``
is refused rather than downloaded whole), every other scheme with fsspec's ranged ``cat_file``,
which fetches exactly the range (no read-ahead). A whole read takes at most
`glyphforge.storage.backend.Backend.whole_limit` bytes.

_Transient failures (a dropped connection, a timeout, HTTP 408, 429 and 5xx, S3's throttling)
are retried `RetryPolicy.attempts` times with exponential backoff (a ``Retry-After`` is
honoured, up to ``max_delay``), each retry logged at INFO; on ``gs://`` gcsfs retries them
itself, and glyphforge does not again. Then, or at once for what retrying cannot fix, an error
names the URL, what was read, what failed and what to do:

* `RemoteFileMissingError` (a ``FileNotFoundError``): no such object, or no such bucket (404; ``no_bucket``);
* `RemoteAccessError` (a ``PermissionError``): the credentials were refused (401, 403);
* `ShortObjectError` (a `RemoteReadError`): the object ends before the range asked for;
* `RemoteReadError` (an ``OSError``): anything else, transient failures included once retried.

Messages never hold credentials: only the URL (query strings are cut) and the server's status.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from glyphforge.storage.backends import is_missing_bucket
from glyphforge.storage.retries import (
    DEFAULT_POLICY,
    RemoteAccessError,
    RemoteFileMissingError,
    RemoteReadError,
    RetryPolicy,
    ShortObjectError,
)

if TYPE_CHECKING:
    from glyphforge.storage.location import Location

__all__ = ["DOWNLOAD_BLOCK", "RemoteAccessError", "RemoteFileMissingError",
           "RemoteReadError", "ShortObjectError", "is_missing_bucket", "list_names", "object_size", "read_bytes",
           "store_call"]

T = TypeVar("T")
#: How much of a whole file is read at a time, streamed (an entry's data file fetched, an object re-hashed, a mirror's
#: file copied).
DOWNLOAD_BLOCK = 8 << 20


def read_bytes(location: Location, start: int | None = None, end: int | None = None, *, what: str = "",
               policy: RetryPolicy = DEFAULT_POLICY) -> bytes:
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
    return location.backend.read(start, end, what=what, policy=policy)


def list_names(location: Location, *, policy: RetryPolicy = DEFAULT_POLICY) -> list[str]:
    """Return the sorted names in the folder at ``location`` (none when it does not exist), fresh from the store.

    Retried and failing as `read_bytes` does (a missing bucket is a `RemoteFileMissingError`).
    """
    return location.backend.names(policy=policy)


def object_size(location: Location, *, what: str = "", policy: RetryPolicy = DEFAULT_POLICY) -> int | None:
    """Return the size of the object at ``location`` as its store says it (None: an HTTP server that does not say):
    one ``HEAD`` over HTTP, fsspec's ``info`` (fresh) otherwise; retried and failing as `read_bytes` does."""
    return location.backend.size(what=what, policy=policy)


def store_call(location: Location, call: Callable[[], T], described: str, *,
               policy: RetryPolicy = DEFAULT_POLICY) -> T:
    """Return ``call()``, an fsspec call on the store of ``location`` (a listing, a multi-object ``cat``, a
    streamed read), retried and failing as `read_bytes` does; ``described`` says what it does ("list s3://...")."""
    return location.backend.call(call, described, policy=policy)
