"""What a URL is, the rules every URL glyphforge takes obeys, its errors, and what a ``file://`` URL names.

A URL is ``scheme://...`` (`is_url`); a plain path never is. `check_url` holds what every URL
must obey whatever its scheme: no user and password in it, and no query string or fragment (an
`UnsupportedURLError` that does not show them: glyphforge carries no secrets in URLs, and finds
files below a URL, where a query string cannot go); it gives the scheme lower case and a
``file://`` URL absolute. `redacted` is how every message, log line and listing shows a URL:
without its user info and query string. Which schemes are taken, and what each one's URLs must
look like, is the table of `glyphforge.storage.backends` (`checked_url`, which calls
`check_url` first): a scheme not in it is an `UnsupportedURLError` naming what is taken; a URL
that names no bucket or host, a bucket name the store would refuse, a bad port or a ``file://``
URL naming no path is a `MalformedURLError` saying what is wrong. This module sits below the configuration, which needs
to tell a local data dir from a URL before any store exists.

A ``file://`` URL names a path on this machine (`file_path`): percent-escapes are decoded
(``Path.as_uri()`` comes back as its path), ``file://localhost/p`` is ``/p``, and
``file://dir/p`` is the relative path ``dir/p`` (as fsspec reads it), made absolute against
the current directory when it is parsed, once.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote
from urllib.request import url2pathname

from glyphforge.errors import ArgumentError

__all__ = ["SCHEME", "SUPPORTED_TEXT", "MalformedURLError", "UnsupportedURLError", "check_url", "file_path",
           "is_url", "redacted"]

#: A URL's scheme and the ``://`` after it (two letters at least: ``C:\\`` is a Windows drive).
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
#: ``user:password@`` in a URL's authority: a secret glyphforge refuses to carry.
_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://[^/?#@]*:[^/?#]*@")
#: A URL's authority in a text: its scheme and what follows up to the path (user info, host, port).
_AUTHORITY = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]+://)(?P<authority>[^/?#\s'\"<>]*)")
#: A query string in a text (of a URL, or of a path as an HTTP client names it: ``/p?token=...``), up to a space,
#: a quote or a bracket; the punctuation that ends a sentence or a clause after it is kept.
_QUERY = re.compile(r"(?<=[^\s'\"(<])\?[^\s'\"<>()]+?(?=[.,:;]*(?:[\s'\"<>()]|$))")
#: What stands for a secret cut out of a text.
REDACTED = "***"
#: What a data dir or an entry may be, for messages.
SUPPORTED_TEXT = ("s3://BUCKET/prefix, gs://BUCKET/prefix, https://HOST/path or http://HOST/path (read only), "
                  "file:///abs/path, or a plain path")


class UnsupportedURLError(ArgumentError, ValueError):
    """A URL glyphforge does not take: a scheme it does not support, or one whose package is not installed."""


class MalformedURLError(UnsupportedURLError):
    """A URL of a supported scheme that cannot name a place: no bucket or host, a bad bucket name or port, no path."""


def is_url(value: object) -> bool:
    """Whether ``value`` is a URL (``scheme://...``), not a path; paths (also ``os.PathLike``) never are."""
    return isinstance(value, str) and SCHEME.match(value) is not None


def redacted(text: str) -> str:
    """``text`` (a URL, or a message, log line or listing naming URLs) without the secrets URLs may carry.

    The one rule glyphforge shows URLs by: a URL's user info (``user:password@``, a token as
    the user) becomes ``***@``, and every query string (``?token=...``, a signed URL's
    signature) becomes ``?***``, also one an HTTP client shows with a path alone. The rest (the
    scheme, the host, the path) stays, so the message still says where.
    """
    def authority(match: re.Match[str]) -> str:
        user, at, host = match["authority"].rpartition("@")
        return f"{match['scheme']}{REDACTED}@{host}" if at else match[0]

    return _QUERY.sub(f"?{REDACTED}", _AUTHORITY.sub(authority, text))


def check_url(url: str) -> str:
    """Return the URL ``url`` with its scheme lower case (a ``file://`` URL made absolute), once it holds no secret.

    Raises
    ------
    UnsupportedURLError
        It holds a user and password, or a query string or fragment (the message does not show them: they would
        travel in pickles and show in messages, and files are found below the URL, where a query cannot go).
    MalformedURLError
        A ``file://`` URL that names no path.
    """
    scheme = url.split("://", 1)[0]
    if _PASSWORD.match(url):
        raise UnsupportedURLError(
            f"a {scheme}:// URL with a user and password in it was given: glyphforge does not carry secrets in "
            "URLs (they would travel in pickles and show in messages). Give the URL without them, and the "
            "credentials through the environment (as the store's SDK reads them) or storage_options")
    if "?" in url or "#" in url:
        raise UnsupportedURLError(
            f"{redacted(url.split('#', 1)[0])}: glyphforge finds files below a URL, so it takes none with a query "
            f"string or fragment (a token there would travel in pickles and show in messages). Give the {scheme}:// "
            "URL alone, and the credentials through the environment (as the store's SDK reads them) or "
            "storage_options (e.g. {'headers': {'Authorization': ...}} for HTTP)")
    scheme, rest = scheme.lower(), url.split("://", 1)[1]
    if scheme == "file":
        return f"file://{quote(file_path(url).as_posix())}"
    return f"{scheme}://{rest}"


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
