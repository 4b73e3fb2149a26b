"""The URLs glyphforge takes for a data dir or an entry, checked when they are parsed, before any fsspec call.

Supported: ``s3://BUCKET/prefix``, ``gs://BUCKET/prefix``, ``https://HOST/path`` and ``http://``
(read-only), ``file:///abs/path``, and plain paths. Any other scheme (``ftp://``, ``hdfs://``...,
also those fsspec knows) is an `UnsupportedURLError` naming that list; a URL of a supported
scheme that names no bucket or host, a bucket name the store would refuse, a bad port or a
``file://`` URL naming no path is a `MalformedURLError` saying what is wrong (`check_url`).
A URL with a user and password in it is refused (an `UnsupportedURLError` that does not show
them): glyphforge carries no secrets in URLs.

A ``file://`` URL names a path on this machine (`file_path`): percent-escapes are decoded
(``Path.as_uri()`` comes back as its path), ``file://localhost/p`` is ``/p``, and
``file://dir/p`` is the relative path ``dir/p`` (as fsspec reads it), made absolute against
the current directory when it is parsed, once.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, urlsplit
from urllib.request import url2pathname

from glyphforge.errors import ArgumentError

__all__ = ["SCHEME", "SUPPORTED", "MalformedURLError", "UnsupportedURLError", "check_url", "file_path", "is_url"]

#: A URL's scheme and the ``://`` after it (two letters at least: ``C:\\`` is a Windows drive).
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
#: ``user:password@`` in a URL's authority: a secret glyphforge refuses to carry.
_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://[^/@]*:[^/@]*@")

#: The schemes glyphforge reads (all) and writes (all but http and https).
SUPPORTED = ("s3", "gs", "https", "http", "file")
#: What a data dir or an entry may be, for messages.
SUPPORTED_TEXT = ("s3://BUCKET/prefix, gs://BUCKET/prefix, https://HOST/path or http://HOST/path (read only), "
                  "file:///abs/path, or a plain path")
#: Other spellings of supported schemes (fsspec's), and glyphforge's.
_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "local": "file"}
#: A bucket name S3 takes (3 to 63 characters; buckets made before 2018 may have capitals, '_' and up to 255).
_S3_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
#: A bucket name GCS takes (3 to 63 characters, up to 222 with dots).
_GS_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_BUCKET_RULES = {
    "s3": (_S3_BUCKET, "3 to 63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"),
    "gs": (_GS_BUCKET, "3 to 63 lowercase letters, digits, '.', '-' and '_', starting and ending with a letter or "
                       "digit"),
}


class UnsupportedURLError(ArgumentError, ValueError):
    """A URL glyphforge does not take: a scheme it does not support, or one whose package is not installed."""


class MalformedURLError(UnsupportedURLError):
    """A URL of a supported scheme that cannot name a place: no bucket or host, a bad bucket name or port, no path."""


def is_url(value: object) -> bool:
    """Whether ``value`` is a URL (``scheme://...``), not a path; paths (also ``os.PathLike``) never are."""
    return isinstance(value, str) and SCHEME.match(value) is not None


def check_url(url: str) -> str:
    """Return ``url`` once its scheme is supported and its form can name a place (a ``file://`` URL made absolute).

    ``url`` is a URL (``scheme://...``); its scheme is returned lower case.

    Raises
    ------
    UnsupportedURLError
        The scheme is not one of `SUPPORTED` (the message names them), or it holds a user and password
        (the message does not show them: they would travel in pickles and show in messages).
    MalformedURLError
        It names no bucket (``s3://``, ``s3:///x``) or host (``https:///x``), a bucket the store would
        refuse, a port that is no number, or no path (``file://``).
    """
    if _PASSWORD.match(url):
        scheme = url.split("://", 1)[0]
        raise UnsupportedURLError(
            f"a {scheme}:// URL with a user and password in it was given: glyphforge does not carry secrets in "
            "URLs (they would travel in pickles and show in messages). Give the URL without them, and the "
            "credentials through the environment (as the store's SDK reads them) or storage_options")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme not in SUPPORTED:
        alias = _ALIASES.get(scheme)
        if alias:
            raise UnsupportedURLError(f"{url}: glyphforge spells {scheme}:// as {alias}://: write {alias}://{rest}")
        raise UnsupportedURLError(f"{url}: glyphforge does not support {scheme}:// URLs; it takes {SUPPORTED_TEXT}. "
                                  "Copy the data to one of those, or mount it and give its path")
    if scheme == "file":
        return f"file://{quote(file_path(url).as_posix())}"
    if scheme in _BUCKET_RULES:
        bucket = rest.split("/", 1)[0]
        pattern, rule = _BUCKET_RULES[scheme]
        if not bucket:
            raise MalformedURLError(f"{url} names no bucket: write {scheme}://BUCKET/prefix")
        if not pattern.fullmatch(bucket) or ".." in bucket:
            raise MalformedURLError(f"{url}: {bucket!r} is not a bucket name {scheme}:// takes ({rule}): check the "
                                    f"URL, {scheme}://BUCKET/prefix")
    else:
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 (a ValueError when it is no number, or out of range)
        except ValueError:
            raise MalformedURLError(f"{url}: its port is not a number from 0 to 65535") from None
        if not parts.hostname:
            raise MalformedURLError(f"{url} names no host: write {scheme}://HOST/path")
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
