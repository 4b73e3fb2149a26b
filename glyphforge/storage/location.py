"""`Location`: a place in object storage or over HTTP, named by a URL and opened with fsspec.

A data dir (or a built entry) may be a URL: ``s3://bucket/prefix``, ``gs://bucket/prefix``,
``https://host/path`` (read-only), ``file:///abs/path``. A plain path is never a URL
(`is_url`): ``C:\\data`` and ``./s3:x`` stay paths, and a URL is never taken for a path.
A URL is checked when a `Location` is made, before any store is asked
(`glyphforge.storage.backends.checked_url`, after
`glyphforge.urls.check_url`: its scheme is in the table of schemes, and its
backend finds it sound: it names a bucket, a host or a path). What is done at a URL is done by
its backend (`Location.backend`), of the class the table holds for its scheme.

A ``file://`` data dir or entry (any URL whose backend has a local path) is the path it names
(`parse_place`, where a data dir or an entry is parsed): it is read and written as that path
is, with its locks and checks, and a relative one is made absolute once, there. A ``file://``
`Location` (a publish target) is made absolute when it is made, too.

Credentials are not glyphforge's business: the filesystem reads them as the provider's SDK
does (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``~/.aws``, ``GOOGLE_APPLICATION_CREDENTIALS``
...) in the process that reads. ``storage_options`` (fsspec's keywords, e.g.
``{"endpoint_url": ...}`` or ``{"anon": True}``) may also hold secrets, so a `Location`
pickles without the options named in :data:`SECRET_OPTIONS`: a DataLoader worker or a Dask
task receives the URL and the harmless options, and takes its credentials from its own
environment.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glyphforge.storage.backends import backend_for, checked_url
from glyphforge.storage.fsspec_backend import FsspecBackend
from glyphforge.urls import SCHEME, MalformedURLError, UnsupportedURLError, is_url, redacted

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from glyphforge.storage.backend import Backend

__all__ = ["SECRET_OPTIONS", "Location", "MalformedURLError", "UnsupportedURLError", "is_url", "parse_place"]

#: storage_options never pickled (credentials: each process takes its own from its environment).
SECRET_OPTIONS = frozenset({
    "key", "secret", "token", "password", "username", "session_token", "aws_access_key_id",
    "aws_secret_access_key", "aws_session_token", "client_secret", "credentials", "headers",
})


@dataclass(frozen=True)
class Location:
    """A URL and the fsspec ``storage_options`` to open it with (see the module docstring).

    ``Location("s3://bucket/data").child("cache", "scenes")`` is ``s3://bucket/data/cache/scenes``
    with the same options; ``loc.backend`` does what is done there.
    """

    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not is_url(self.url):
            raise UnsupportedURLError(f"{self.url!r} is not a URL (scheme://...); a plain path is a local directory")
        scheme, rest = checked_url(self.url).split("://", 1)
        object.__setattr__(self, "url", f"{scheme}://{rest.rstrip('/') or rest[:1]}")  # file:/// stays the root
        object.__setattr__(self, "storage_options", dict(self.storage_options))

    @property
    def scheme(self) -> str:
        """The URL's scheme, lower case (``s3``, ``https``, ``file``...)."""
        match = SCHEME.match(self.url)
        assert match is not None  # checked in __post_init__
        return match.group(1).lower()

    @cached_property
    def backend(self) -> Backend:
        """The backend of the URL, of the class the table of schemes holds for its scheme
        (`glyphforge.storage.backends`)."""
        known = self.__dict__.get("_backend_class")
        return backend_for(self) if known is None else known(self.url, self.storage_options)

    @property
    def read_only(self) -> bool:
        """Whether glyphforge only reads here (HTTP)."""
        return self.backend.read_only

    @property
    def fs(self) -> AbstractFileSystem:
        """The fsspec filesystem of the URL, when its backend is an fsspec one (`FsspecBackend.fs`), for a user's own
        fsspec calls (glyphforge's code does what it does through `backend`); a `TypeError` for another backend."""
        return self._fsspec_backend().fs

    @property
    def path(self) -> str:
        """The path of the URL on `fs` (as fsspec names it: ``bucket/data`` for ``s3://bucket/data``)."""
        return self._fsspec_backend().path

    def _fsspec_backend(self) -> FsspecBackend:
        backend = self.backend
        if not isinstance(backend, FsspecBackend):
            raise TypeError(f"{self} is served by {type(backend).__name__}, not by an fsspec filesystem")
        return backend

    def child(self, *names: str) -> Location:
        """The location ``names`` below this one, with the same options.

        Below a checked URL, a path of plain names is as sound as its parent (same scheme, bucket or host), so it is
        not checked again; a ``file://`` URL (spelled by its path) and a name holding ``?`` or ``#`` are.
        """
        return self._below("/".join([self.url, *(name.strip("/") for name in names)]))

    def suffixed(self, suffix: str) -> Location:
        """The location whose URL is this one's with ``suffix`` after it (``<entry>.work``), with the same options."""
        return self._below(self.url + suffix)

    def _below(self, url: str) -> Location:
        """The location ``url``, which adds a path to this one's URL: as sound as this one (same scheme, bucket or
        host), so it is not checked again, and is served by a backend of the same class; a ``file://`` URL (spelled
        by its path) and one gaining ``?`` or ``#`` are checked."""
        if self.url.startswith("file:") or any(c in url for c in "?#"):
            return Location(url, self.storage_options)
        below = object.__new__(Location)
        object.__setattr__(below, "url", url.rstrip("/"))
        object.__setattr__(below, "storage_options", dict(self.storage_options))
        if "backend" in self.__dict__:  # its class known: the table of schemes is not asked again
            below.__dict__["_backend_class"] = type(self.__dict__["backend"])
        return below

    @property
    def name(self) -> str:
        """The last part of the URL."""
        return self.url.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        """The URL for messages: without its secrets (`glyphforge.urls.redacted`); ``url`` is the URL itself."""
        return redacted(self.url)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle the URL and the options but the secret ones (see the module docstring)."""
        return Location, (self.url, {name: value for name, value in self.storage_options.items()
                                     if name not in SECRET_OPTIONS})


def parse_place(value: str | os.PathLike[str] | Location, storage_options: Mapping[str, Any] | None = None,
                ) -> Path | Location:
    """Where the data dir or entry ``value`` is: a `Location` to read with fsspec, or a path on this machine.

    A URL becomes a `Location` with ``storage_options`` (checked: `Location`); a ``file://`` URL
    (or `Location`, or any whose backend has a local path) becomes the absolute path it names, so
    it is read as that path is (see the module docstring); a path is returned as given.

    Raises
    ------
    UnsupportedURLError
        The URL's scheme is not supported, or (`MalformedURLError`) it cannot name a place.
    """
    if isinstance(value, Location):
        location = value
    elif is_url(value):
        location = Location(str(value), storage_options or {})
    else:
        return Path(value)
    local = location.backend.local_path
    return location if local is None else local
