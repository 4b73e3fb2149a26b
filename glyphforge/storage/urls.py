"""The errors of a URL glyphforge does not take, and what a ``file://`` URL names.

Which schemes are taken, and what each one's URLs must look like, is the table of
`glyphforge.storage.backends` (`checked_url`): a scheme not in it is an `UnsupportedURLError`
naming what is taken; a URL that names no bucket or host, a bucket name the store would refuse,
a bad port or a ``file://`` URL naming no path is a `MalformedURLError` saying what is wrong.

A ``file://`` URL names a path on this machine (`file_path`): percent-escapes are decoded
(``Path.as_uri()`` comes back as its path), ``file://localhost/p`` is ``/p``, and
``file://dir/p`` is the relative path ``dir/p`` (as fsspec reads it), made absolute against
the current directory when it is parsed, once.
"""
from __future__ import annotations

from pathlib import Path
from urllib.request import url2pathname

from glyphforge.errors import ArgumentError

__all__ = ["SUPPORTED_TEXT", "MalformedURLError", "UnsupportedURLError", "file_path"]

#: What a data dir or an entry may be, for messages.
SUPPORTED_TEXT = ("s3://BUCKET/prefix, gs://BUCKET/prefix, https://HOST/path or http://HOST/path (read only), "
                  "file:///abs/path, or a plain path")


class UnsupportedURLError(ArgumentError, ValueError):
    """A URL glyphforge does not take: a scheme it does not support, or one whose package is not installed."""


class MalformedURLError(UnsupportedURLError):
    """A URL of a supported scheme that cannot name a place: no bucket or host, a bad bucket name or port, no path."""


def file_path(url: str) -> Path:
    """The absolute path the ``file://`` URL ``url`` names on this machine (see the module docstring).

    Raises
    ------
    MalformedURLError
        It names no path (``file://``).
    """
    rest = url.split("://", 1)[1]
    if rest.startswith("localhost/"):
        rest = rest[len("localhost"):]
    if not rest:
        raise MalformedURLError(f"{url} names no path: write file:///abs/path (or give the path itself)")
    if rest.startswith("//"):  # file:////x: POSIX leaves a path starting with two slashes to the system
        rest = "/" + rest.lstrip("/")
    return Path(url2pathname(rest)).absolute()
