"""The one table of schemes: which `Backend` class serves the URLs of each scheme.

=========================  ==========================================================
``file://`` (and a path)   `LocalBackend`: a folder on this machine
``s3://``                  `S3Backend` (fsspec, s3fs; ``pip install 'glyphforge[s3]'``)
``gs://``                  `GcsBackend` (fsspec, gcsfs; ``pip install 'glyphforge[gcs]'``)
``http://``, ``https://``  `HttpBackend`: read-only, with requests
=========================  ==========================================================

`register_backend` adds a scheme (or replaces a scheme's class); `backend_for` makes the backend
of a URL, a `glyphforge.storage.location.Location` or a path; `checked_url` is how every URL
glyphforge is given is checked, before any store is asked (its scheme is in the table, and its
backend finds its form sound). A scheme not in the table (``ftp://``, ``hdfs://``, also those
fsspec knows) is an `UnsupportedURLError` naming what is taken.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from glyphforge.storage.backend import Backend
from glyphforge.storage.fsspec_backend import GcsBackend, S3Backend
from glyphforge.storage.http_backend import HttpBackend
from glyphforge.storage.local_backend import LocalBackend
from glyphforge.urls import SUPPORTED_TEXT, UnsupportedURLError, check_url

__all__ = ["Place", "backend_class", "backend_for", "checked_url", "is_missing_bucket", "register_backend"]

#: Scheme (lower case) -> the class of its backends.
_BACKENDS: dict[str, type[Backend]] = {
    "file": LocalBackend,
    "s3": S3Backend,
    "gs": GcsBackend,
    "http": HttpBackend,
    "https": HttpBackend,
}
#: The schemes glyphforge itself serves (`SUPPORTED_TEXT` names them in messages).
_BUILT_IN = frozenset(_BACKENDS)
#: Other spellings of the built-in schemes (fsspec's), and glyphforge's.
_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "local": "file"}


class Place(Protocol):
    """What `backend_for` takes of a URL's holder (a `glyphforge.storage.location.Location`)."""

    @property
    def url(self) -> str: ...

    @property
    def storage_options(self) -> Mapping[str, Any]: ...


def register_backend(scheme: str, cls: type[Backend]) -> None:
    """Serve URLs ``scheme://...`` with backends of class ``cls`` (replacing the class the scheme had).

    Parameters
    ----------
    scheme
        The URL scheme, as in ``scheme://``: letters, digits, ``+``, ``-`` and ``.``, two characters at least.
    cls
        A `glyphforge.storage.backend.Backend` subclass: it implements the one-shot operations and
        gets the retries, the errors and the messages of every store (see `glyphforge.storage.backend`).

    Raises
    ------
    ValueError, TypeError
        ``scheme`` is no scheme, or ``cls`` is no `Backend` subclass.
    """
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"register_backend({scheme!r}, {cls!r}): the class must subclass "
                        "glyphforge.storage.backend.Backend")
    name = scheme.lower() if isinstance(scheme, str) else ""
    if len(name) < 2 or not name[0].isalpha() or not all(c.isalnum() or c in "+-." for c in name):
        raise ValueError(f"register_backend({scheme!r}, ...): a scheme is two or more letters, digits, '+', '-' "
                         "or '.', starting with a letter (s3, https, my-store)")
    _BACKENDS[name] = cls


def backend_class(scheme: str) -> type[Backend]:
    """The class serving ``scheme``; `UnsupportedURLError` when none does (`checked_url` says it with the URL)."""
    try:
        return _BACKENDS[scheme.lower()]
    except KeyError:
        raise UnsupportedURLError(f"glyphforge does not support {scheme}:// URLs; it takes {_taken()}") from None


def checked_url(url: str) -> str:
    """Return ``url`` (``scheme://...``) once its scheme is in the table and its backend finds it sound, spelled as
    glyphforge keeps it (the scheme lower case; a ``file://`` URL made absolute).

    Raises
    ------
    UnsupportedURLError
        The scheme is not in the table (the message names what is), or the URL holds a user and password
        (`glyphforge.urls.check_url`).
    MalformedURLError
        Its backend says it cannot name a place: no bucket (``s3://``, ``s3:///x``) or host (``https:///x``), a
        bucket the store would refuse, a port that is no number, or no path (``file://``).
    """
    scheme, rest = check_url(url).split("://", 1)  # no secret in it; the scheme lower case
    if scheme not in _BACKENDS:
        alias = _ALIASES.get(scheme)
        if alias:
            raise UnsupportedURLError(f"{url}: glyphforge spells {scheme}:// as {alias}://: write {alias}://{rest}")
        raise UnsupportedURLError(f"{url}: glyphforge does not support {scheme}:// URLs; it takes {_taken()}. "
                                  "Copy the data to one of those, or mount it and give its path")
    return _BACKENDS[scheme].check(f"{scheme}://{rest}")


def backend_for(place: Place | str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> Backend:
    """The backend of ``place``: a `Location` (its options), a URL (checked: `checked_url`) or a local path.

    Raises
    ------
    UnsupportedURLError
        A URL whose scheme is not in the table, or (`MalformedURLError`) that cannot name a place.
    """
    if isinstance(place, (str, os.PathLike)):
        text = os.fspath(place)
        if "://" not in text:
            return LocalBackend(Path(text).absolute().as_uri(), {})
        url = checked_url(text)
        return _BACKENDS[url.split("://", 1)[0]](url, storage_options or {})
    return backend_class(place.url.split("://", 1)[0])(place.url, place.storage_options)


def is_missing_bucket(error: FileNotFoundError) -> bool:
    """Whether a store's ``error`` says that a bucket does not exist (not only an object of it), as any backend in
    the table reads it (`Backend.is_missing_bucket`)."""
    return any(cls.is_missing_bucket(error) for cls in set(_BACKENDS.values()))


def _taken() -> str:
    """What a data dir or an entry may be, for messages: the built-in forms, then the registered schemes."""
    added = sorted(set(_BACKENDS) - _BUILT_IN)
    return SUPPORTED_TEXT + "".join(f", or {scheme}://..." for scheme in added)
