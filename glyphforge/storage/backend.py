"""`Backend`: what glyphforge needs of a place where data lies (a local folder, a bucket, a web server).

One `Backend` is made for one URL (`glyphforge.storage.backends.backend_for`), of the class
registered for its scheme (`glyphforge.storage.backends.register_backend`). A backend class
implements a few one-shot operations (`Backend.read_once`, `Backend.size_once`,
`Backend.names_once`, `Backend.write`, `Backend.upload`, `Backend.files`, `Backend.sizes_below`,
`Backend.read_whole`, `Backend.open_read`, `Backend.remove`) and says how its store
fails (`Backend.store_failure`, `Backend.is_missing_bucket`); the base class turns them into the
reads glyphforge makes, retried under a `RetryPolicy` and failing with the errors of
`glyphforge.storage.retries`, whose messages name the URL, what failed and what to do.

A one-shot operation raises what its store raises: ``FileNotFoundError``, ``PermissionError``,
an ``OSError`` or ``TimeoutError`` (tried again, with backoff), or anything else (not retried).
The built-in backends raise glyphforge's private sorting of their clients' failures
(`glyphforge.storage.read_failures`) too.
"""
from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Self, TypeVar

from glyphforge.errors import ArgumentError
from glyphforge.storage.read_failures import _Permanent, _Short, _Transient, reason, sorted_failure
from glyphforge.storage.retries import (
    DEFAULT_POLICY,
    RemoteAccessError,
    RemoteFileMissingError,
    RemoteReadError,
    RetryPolicy,
    ShortObjectError,
)
from glyphforge.urls import redacted

__all__ = ["Backend", "ReadOnlyStoreError"]

log = logging.getLogger(__name__)
T = TypeVar("T")

class ReadOnlyStoreError(ArgumentError, ValueError):
    """A write glyphforge does not make: to a store it only reads (HTTP), or a deletion at a URL data dir
    (``cache rm``, ``gc``: glyphforge deletes nothing there). Nothing was written; the message says what to do."""


class Backend(ABC):
    """The storage operations of one URL (see the module docstring).

    Parameters
    ----------
    url
        The URL, as `glyphforge.storage.backends.checked_url` returns it (its scheme lower case).
    storage_options
        The store's options (fsspec's keywords, e.g. ``{"endpoint_url": ...}``).
    """

    #: Whether glyphforge only reads here: every write raises `ReadOnlyStoreError`.
    read_only: ClassVar[bool] = False
    #: The name of the store's client when it retries transient failures itself (glyphforge then tries once).
    tries_itself: ClassVar[str | None] = None
    #: Whether `upload` takes a multipart upload's ``chunksize`` and ``max_concurrency`` (s3fs's).
    takes_part_options: ClassVar[bool] = False
    #: The most bytes a whole-object read (a manifest, a request record) takes, from any store.
    whole_limit: ClassVar[int] = 256 << 20

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        #: The URL's scheme, lower case.
        self.scheme = url.split("://", 1)[0].lower()

    @classmethod
    def check(cls, url: str) -> str:
        """Return ``url`` (``scheme://rest``, its scheme lower case) once it can name a place of this store, in the
        one spelling glyphforge keeps; raise `glyphforge.urls.MalformedURLError` saying what is wrong."""
        return url

    @property
    def local_path(self) -> Path | None:
        """The folder or file on this machine the URL is, None when it is not on this machine."""
        return None

    def check_client(self) -> None:
        """Raise `glyphforge.urls.UnsupportedURLError` naming what to install when this machine lacks the store's
        client; the store is asked nothing. The default: a backend that could be made has its client."""
        return None

    def below(self, name: str) -> Self:
        """The backend of the object ``name`` (a path, ``a/b``) below this URL, with the same options."""
        return type(self)(type(self).check(f"{self.url}/{name.strip('/')}"), self.storage_options)

    # -- one-shot operations (a backend's own) ---------------------------------------------
    @abstractmethod
    def read_once(self, start: int | None, end: int | None, policy: RetryPolicy) -> bytes:
        """Bytes ``[start, end)`` of the object, or all of it (at most `whole_limit`) when both are None."""

    @abstractmethod
    def size_once(self, policy: RetryPolicy) -> int | None:
        """The object's size as the store says it (fresh); None when it does not say."""

    @abstractmethod
    def names_once(self) -> list[str]:
        """The sorted names in the folder (none when it does not exist; a missing bucket raises), fresh."""

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Write ``data`` as the object: a reader sees the old one, or the whole new one."""

    @abstractmethod
    def upload(self, source: Path, *, sent: Callable[[int], object] | None = None, **options: Any) -> None:
        """Copy the local file ``source`` to the object: a reader sees it whole or not at all.

        ``sent`` is told the bytes of each piece sent; ``options`` go to the store's upload.
        """

    @abstractmethod
    def files(self) -> dict[str, dict[str, Any]]:
        """What the store says of each object (file) directly in the folder (``size``, checksums...), by name;
        empty when there is none; fresh."""

    @abstractmethod
    def sizes_below(self) -> dict[str, int]:
        """The size of every object below the URL, at any depth, by its path below it (``kind/key/name``); empty
        when there is none (a missing bucket raises); fresh."""

    @abstractmethod
    def read_whole(self) -> bytes:
        """The whole object in one request, of any size, raising what the store raises (unsorted: the caller names
        its failures, `glyphforge.storage.store_errors`)."""

    @abstractmethod
    def open_read(self, block_size: int) -> BinaryIO:
        """The object opened as a binary stream, fetched ``block_size`` bytes at a time (a context manager; its
        ``size`` attribute, when it has one, is the object's size)."""

    @abstractmethod
    def remove(self, names: Iterable[str]) -> None:
        """Delete the objects ``names`` directly in the folder (exact names, each there: never a prefix), then the
        folder itself when that leaves it empty (a store with folders)."""

    def read_objects(self, names: Iterable[str]) -> dict[str, bytes | Exception]:
        """Each object ``names`` (paths below the URL) read whole (`read_whole`): its bytes, or the error reading it
        (``FileNotFoundError`` when there is none), by name. A store reading many at once overrides it."""
        read: dict[str, bytes | Exception] = {}
        for name in names:
            try:
                read[name] = self.below(name).read_whole()
            except Exception as error:
                read[name] = error
        return read

    def not_replaceable(self) -> str | None:
        """What is at the object's place that glyphforge did not write and so never replaces, said as "a ..."; None
        when nothing such is there (an object store holds objects only: the default)."""
        return None

    def remove_abandoned(self, names: Iterable[str]) -> list[str]:
        """Remove the staging files that killed writers of the objects ``names`` in the folder left; return their
        names. None on an object store (the default): a put makes the whole object at once, and leaves none."""
        return []

    @classmethod
    def store_failure(cls, error: Exception) -> Exception | None:
        """The store client's ``error`` in glyphforge's words (see the module docstring), None when it is none of
        its own (then the generic sorting applies: `glyphforge.storage.read_failures.sorted_failure`)."""
        return None

    @classmethod
    def is_missing_bucket(cls, error: FileNotFoundError) -> bool:
        """Whether the store's ``error`` says that the bucket itself does not exist (not only an object of it)."""
        return False

    # -- what glyphforge calls -------------------------------------------------------------
    def read(self, start: int | None = None, end: int | None = None, *, what: str = "",
             policy: RetryPolicy = DEFAULT_POLICY) -> bytes:
        """Return bytes ``[start, end)`` of the object, or all of it when both are None, retried (`retried`)."""
        span = f"bytes {start:,} to {end:,} of " if start is not None and end is not None else ""
        described = f"{span}{redacted(self.url)}" + (f" ({what})" if what else "")
        return self.retried(lambda: self.read_once(start, end, policy), f"read {described}", policy)

    def size(self, *, what: str = "", policy: RetryPolicy = DEFAULT_POLICY) -> int | None:
        """Return the object's size as the store says it (None: it does not say), retried."""
        described = f"find the size of {redacted(self.url)}" + (f" ({what})" if what else "")
        return self.retried(lambda: self.size_once(policy), described, policy)

    def names(self, *, policy: RetryPolicy = DEFAULT_POLICY) -> list[str]:
        """Return the sorted names in the folder (none when it does not exist), retried."""
        return self.retried(self.names_once, f"list {redacted(self.url)}", policy)

    def call(self, call: Callable[[], T], described: str, *, policy: RetryPolicy = DEFAULT_POLICY) -> T:
        """Return ``call()``, a call on this store (``described``: what it does, "list s3://..."), retried."""
        return self.retried(lambda: self.classified(call), described, policy)

    @classmethod
    def sorted_failure(cls, error: Exception) -> Exception:
        """Return ``error`` as glyphforge sorts it: the store's own words first (`store_failure`), then Python's."""
        return cls.store_failure(error) or sorted_failure(error)

    @classmethod
    def classified(cls, call: Callable[[], T]) -> T:
        """Return ``call()``, its failures sorted by `sorted_failure`."""
        try:
            return call()
        except Exception as error:
            failure = cls.sorted_failure(error)
            if failure is error:
                raise
            raise failure from None

    def retried(self, attempt: Callable[[], T], described: str, policy: RetryPolicy) -> T:
        """Return ``attempt()``, tried again on transient failures; the errors of `glyphforge.storage.retries`
        otherwise. ``described`` is what is done, for messages ("read bytes 0 to 9 of s3://...")."""
        client = self.tries_itself
        attempts = 1 if client else policy.attempts
        failures = 0
        while True:
            try:
                return attempt()
            except _Transient as error:
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
                no_bucket = self.is_missing_bucket(error)
                missing = "the bucket does not exist" if no_bucket else "there is no such object"
                raise RemoteFileMissingError(f"could not {described}: {missing}. It was deleted, or the URL is "
                                             "wrong: check it", no_bucket) from None
            except PermissionError as error:
                raise RemoteAccessError(
                    f"could not {described}: access was refused ({reason(error)}). The credentials this process "
                    "has are wrong or missing: set them as the store's SDK reads them (e.g. AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY, ~/.aws, GOOGLE_APPLICATION_CREDENTIALS), or pass storage_options"
                ) from None
            except _Permanent as error:
                raise (ShortObjectError if isinstance(error, _Short) else RemoteReadError)(
                    f"could not {described}: {error}") from None

    def refuse_write(self) -> ReadOnlyStoreError:
        """The error of a write asked of a read-only store."""
        return ReadOnlyStoreError(
            f"cannot write {redacted(self.url)}: glyphforge only reads {self.scheme}:// URLs. Write to object storage "
            "(s3://, gs://), a file:// directory or a local path, and serve that over HTTP if you wish")
