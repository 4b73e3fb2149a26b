"""The write side's errors: one translator from an object store's failures to a `RemoteStorageError`.

Publishing (`glyphforge.cache.remote.publish`) and building into a URL data dir
(`glyphforge.builds.making.url_build`) write objects, and read or list a few on the way. Whatever
the store raises (botocore's, aiohttp's, gcsfs's and google's errors, fsspec's OSErrors,
glyphforge's own read errors of `glyphforge.storage.reads`) is sorted as the read side sorts
it, by the place's backend (`glyphforge.storage.backend.Backend.sorted_failure`), and raised as
one `RemoteStorageError`, a
`glyphforge.StorageError`, whose one paragraph says what the task was and where, what failed
while doing what, what to do, and how the task resumes::

    cannot publish to s3://bucket/data/cache/scenes/3fa2...: the bucket does not exist while
    uploading arrays.pklz (...). Create the bucket (glyphforge never creates one), or check the
    URL, then run the same command again: ...

Transient failures are not retried here: a write is resumed by running the task again.
Messages never hold a secret: query strings and ``user:password@`` are cut, and the values of
the secret storage options (`glyphforge.storage.location.SECRET_OPTIONS`) and of
:data:`SECRET_VARIABLES` are starred out.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from glyphforge.errors import StorageError
from glyphforge.storage.location import SECRET_OPTIONS, Location
from glyphforge.storage.retries import RemoteAccessError, RemoteFileMissingError, RemoteReadError
from glyphforge.urls import redacted

__all__ = ["SECRET_VARIABLES", "RemoteStorageError", "StoreTask", "store_error", "translated", "translated_call"]

T = TypeVar("T")

#: Environment variables whose values never appear in a message.
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")

_REFUSED = ("the store refused the credentials or the permission",
            "Check the credentials this process reads (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or "
            "~/.aws for s3://; GOOGLE_APPLICATION_CREDENTIALS for gs://) and that they may write there")
_NO_BUCKET = ("the bucket does not exist", "Create the bucket (glyphforge never creates one), or check the URL")
_MISSING = ("an object went missing", "Check the URL, and that nothing else removes objects there meanwhile")
_FAILED = ("the store could not be reached or failed",
           "Check the URL, the endpoint (AWS_ENDPOINT_URL, or storage_options) and the network")


class RemoteStorageError(StorageError):
    """Writing to a URL (or reading it for a write) failed: the message names the URL, what failed and what to do.

    A `glyphforge.StorageError`; ``filename`` is the URL of the task (the entry's).
    """


@dataclass(frozen=True)
class StoreTask:
    """What a series of writes to a URL is for, as messages say it.

    Attributes
    ----------
    verb
        What is done to the URL: ``"publish to"``, ``"build into"``.
    again
        How the task resumes once fixed, after "then": ``"run the same command again: ..."``.
    """

    verb: str
    again: str


def store_error(error: Exception, place: Location, doing: str, task: StoreTask) -> RemoteStorageError:
    """Return the `RemoteStorageError` for ``error``, raised while ``doing`` ("uploading manifest.json") ``task``
    at ``place`` (the entry's URL: the message names it, and its secret options are starred out)."""
    failure = place.backend.sorted_failure(error)
    why, fix = _meaning(failure, place)
    detail = "" if isinstance(error, (RemoteFileMissingError, RemoteAccessError)) else \
        f" ({_scrub(f'{type(error).__name__}: {error}', place)})"  # glyphforge's own: `why` says it all
    converted = RemoteStorageError(f"cannot {task.verb} {redacted(place.url)}: {why} while {doing}{detail}. "
                                   f"{fix}, then {task.again}")
    converted.errno = getattr(error, "errno", None)
    converted.filename = place.url
    return converted


@contextmanager
def translated(place: Location, doing: str, task: StoreTask) -> Iterator[None]:
    """Raise the store's errors in the block as `store_error` says; glyphforge's own errors (a conflict, a bad URL,
    a full local disk) pass as they are."""
    try:
        yield
    except Exception as error:
        if _is_verdict(error):
            raise
        raise store_error(error, place, doing, task) from error


def translated_call(place: Location, doing: str, task: StoreTask, call: Callable[[], T]) -> T:
    """Return ``call()``, its errors translated as by `translated` (for a call run on a thread pool)."""
    with translated(place, doing, task):
        return call()


def _is_verdict(error: Exception) -> bool:
    """Whether ``error`` is glyphforge's own verdict (a conflict, a broken manifest, a bad URL, a full disk), not a
    failure of the store: its message says what to do already. glyphforge's read errors are the store's."""
    ours = type(error).__module__.split(".")[0] == "glyphforge"
    return ours and not isinstance(error, (RemoteReadError, RemoteFileMissingError, RemoteAccessError))


def _meaning(failure: Exception, place: Location) -> tuple[str, str]:
    """What a sorted ``failure`` at ``place`` means, and what to do about it."""
    if isinstance(failure, PermissionError):
        return _REFUSED
    if isinstance(failure, FileNotFoundError):
        no_bucket = getattr(failure, "no_bucket", False) or place.backend.is_missing_bucket(failure)
        return _NO_BUCKET if no_bucket else _MISSING
    return _FAILED  # a transient failure too: the task is resumed by running it again, not retried here


def _scrub(text: str, place: Location) -> str:
    """``text`` without URL query strings, ``user:password@``, or the secrets of ``place``'s options and of the
    environment."""
    secrets = [str(value) for name, value in place.storage_options.items() if name in SECRET_OPTIONS and value]
    secrets += [os.environ[name] for name in SECRET_VARIABLES if os.environ.get(name)]
    text = redacted(text)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
