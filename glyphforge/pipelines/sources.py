"""Where a file of a `Resource` may come from, and copying it from a local or object-storage source.

The sources of a resource, in order: the ``mirrors`` given, those in ``$GLYPHFORGE_MIRROR``,
then its origin URLs. A mirror base ``M`` (``https://``, ``http://``, ``file://``, a plain
directory, or any URL fsspec opens: ``s3://``, ``gs://``...) serves ``M/<dataset>/<filename>``.
Offline, only the local ones (directories, ``file://``) are kept: object storage is the
network, as HTTP is. A local or fsspec source is copied into the ``.part`` file here; an HTTP
one is downloaded by :mod:`glyphforge.pipelines.http_source`.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote, urlsplit
from urllib.request import url2pathname

from glyphforge import config
from glyphforge._files import path_too_long, shown_path, writing
from glyphforge.errors import StorageError
from glyphforge.pipelines.http_source import CHUNK_SIZE, Attempt, _SourceFailed, progress_bar
from glyphforge.pipelines.resource import Resource
from glyphforge.storage.backends import checked_url
from glyphforge.storage.location import Location, MalformedURLError, UnsupportedURLError
from glyphforge.storage.reads import DOWNLOAD_BLOCK
from glyphforge.urls import redacted

__all__ = ["Source", "check_mirror", "copy_local", "copy_remote", "local_mirror", "sources"]


@dataclass(frozen=True)
class Source:
    """Where to get the file (``location``): ``path`` for a local one, ``remote`` for one fsspec opens, else HTTP."""

    location: str
    path: Path | None = None
    remote: Location | None = None


def sources(resource: Resource, mirrors: Iterable[str | os.PathLike[str]] | str | None, offline: bool,
            ) -> tuple[list[Source], tuple[str, ...]]:
    """Return the sources of ``resource`` to try in order, and the names of the mirrors among them.

    ``mirrors`` are the mirror bases given (a string is split on spaces); those in
    ``$GLYPHFORGE_MIRROR`` follow. ``offline`` keeps the local sources only: network mirrors are
    neither tried nor reported as tried. The names are for messages: without their secrets
    (`glyphforge.urls.redacted`).
    """
    mirror_sources = _mirror_sources(resource, mirrors)
    found = [*mirror_sources, *map(_source_from_url, (resource.url, *resource.more_urls))]
    if offline:
        found = [source for source in found if source.path is not None]
        mirror_sources = [source for source in mirror_sources if source.path is not None]
    return found, tuple(redacted(source.location) for source in mirror_sources)


def _mirror_sources(resource: Resource, mirrors: Iterable[str | os.PathLike[str]] | str | None) -> list[Source]:
    given = mirrors.split() if isinstance(mirrors, str) else [os.fspath(mirror) for mirror in mirrors or ()]
    bases = config.mirror_setting(given)
    sources = []
    for base in bases:
        root = local_mirror(base)
        if root is not None:
            path = root / resource.dataset / resource.filename
            sources.append(Source(str(path), path))
        elif urlsplit(base).scheme.lower() in ("http", "https"):
            location = f"{base.rstrip('/')}/{quote(resource.dataset)}/{quote(resource.filename)}"
            sources.append(Source(location))
        else:
            remote = _remote_mirror(base).child(resource.dataset, resource.filename)
            sources.append(Source(remote.url, remote=remote))
    return sources


def check_mirror(base: str) -> None:
    """Refuse the mirror base ``base`` when no file could come from it, before any is fetched.

    A mirror is a directory (a path or ``file:///path``), an ``http(s)://`` URL (its user and
    password, HTTP basic auth to a private mirror, are taken, and never shown:
    `glyphforge.urls.redacted`), or an object storage URL glyphforge takes (``s3://``,
    ``gs://``; checked as `glyphforge.storage.Location` checks one). The files are found
    below it, so it takes no query string.

    Raises
    ------
    UnsupportedURLError
        It is blank, of a scheme glyphforge does not take (``ftp://``), holds a query string, or
        (`MalformedURLError`) names no host or bucket, or a bucket the store refuses. The message
        shows no secret of it.
    """
    if not base.strip():
        raise MalformedURLError(f"a mirror is blank ({base!r}): give a directory, or a URL (https://HOST/path, "
                                "s3://BUCKET/prefix, gs://BUCKET/prefix, file:///path)")
    parts = urlsplit(base) if "://" in base else None
    if parts is not None and (parts.query or parts.fragment):
        raise UnsupportedURLError(
            f"mirror {redacted(base)!r} is not supported: a mirror's files are found below it, so it takes no query "
            "string or fragment. Give the base URL alone (credentials of an HTTP mirror as https://USER:PASSWORD@HOST/"
            "path, or in ~/.netrc; of object storage in the environment, as its SDK reads them)")
    scheme = parts.scheme.lower() if parts is not None else ""
    if scheme in ("", "file"):
        local_mirror(base)
    elif scheme in ("http", "https"):
        authority, slash, path = base.split("://", 1)[1].partition("/")
        try:
            checked_url(f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}")  # its user and password taken
        except UnsupportedURLError as error:
            raise type(error)(f"mirror {redacted(base)!r} is not supported: {error}") from None
    else:
        _remote_mirror(base)


def local_mirror(base: str) -> Path | None:
    """The directory of the mirror base ``base`` when it is local (a path or ``file://``), else None.

    Raises
    ------
    UnsupportedURLError
        A ``file://`` URL naming another host.
    """
    scheme = urlsplit(base).scheme.lower() if "://" in base else ""
    return _local_path(base) if scheme in ("", "file") else None


def _remote_mirror(base: str) -> Location:
    """The location of the mirror base ``base`` (``s3://``, ``gs://``...).

    Raises `UnsupportedURLError` (a ValueError) naming the package to install when the store's
    client is not installed here.
    """
    try:
        location = Location(base)  # an unsupported scheme or a malformed URL: before the store is asked
        location.backend.check_client()  # opens nothing: checks the store's client is installed
    except UnsupportedURLError as error:
        raise UnsupportedURLError(f"mirror {redacted(base)!r} is not supported: {error}") from None
    return location


def _source_from_url(url: str) -> Source:
    if urlsplit(url).scheme.lower() == "file":
        path = _local_path(url)
        return Source(str(path), path)
    return Source(url)


def _local_path(base: str) -> Path:
    if "://" not in base:
        return _short_enough(base, Path(base).expanduser())
    parts = urlsplit(base)
    if parts.netloc not in ("", "localhost"):
        raise UnsupportedURLError(
            f"mirror {redacted(base)!r} is not supported: a file:// URL names a path on this machine (file:///path, no "
            "host); use a plain directory, an https:// URL or an object storage URL (s3://, gs://), space-separated in "
            "GLYPHFORGE_MIRROR"
        )
    return _short_enough(base, Path(url2pathname(parts.path)))


def _short_enough(base: str, path: Path) -> Path:
    """``path``, the folder of the mirror ``base``; a `MalformedURLError` naming the limit when this system cannot
    take it (a bad argument, found before any work)."""
    too_long = path_too_long(path)
    if too_long:
        raise MalformedURLError(f"mirror {shown_path(base)} cannot be read: {too_long} (ENAMETOOLONG); give a "
                                "shorter path")
    return path


def copy_local(path: Path, part: Path, resource: Resource, progress: bool) -> None:
    """Copy the local file ``path`` into ``part``; `_SourceFailed` when it is missing, unreadable or of another size."""
    try:
        with open(path, "rb") as source:
            _copy_stream(source, os.fstat(source.fileno()).st_size, str(path), part, resource, progress)
    except StorageError:
        raise  # the destination's problem, not the mirror's: no other source can help
    except FileNotFoundError:
        raise _SourceFailed(Attempt(str(path), "no such file")) from None
    except OSError as error:
        raise _SourceFailed(Attempt(str(path), f"cannot read it ({error})")) from error


def copy_remote(location: Location, part: Path, resource: Resource, progress: bool) -> None:
    """Stream the object at ``location`` (its backend's `open_read`) into ``part``; `_SourceFailed` when it cannot be
    read."""
    try:
        with location.backend.open_read(DOWNLOAD_BLOCK) as source:
            _copy_stream(source, getattr(source, "size", None), location.url, part, resource, progress)
    except (StorageError, _SourceFailed):
        raise  # the destination's problem (no other source can help), or already a failure of this source
    except FileNotFoundError:
        raise _SourceFailed(Attempt(location.url, "no such object")) from None
    except Exception as error:  # a store's client raises its own errors (botocore's, aiohttp's) beside OSError
        raise _SourceFailed(Attempt(location.url, f"cannot read it ({type(error).__name__}: {error}); check the "
                                   "credentials the provider's SDK finds in the environment")) from error


def _copy_stream(source: BinaryIO, size: int | None, location: str, part: Path, resource: Resource,
                 progress: bool) -> None:
    """Copy ``source`` (``size`` bytes, None: unknown) into ``part``; `_SourceFailed` when the size is not pinned's."""
    if resource.size is not None and size is not None and size != resource.size:
        raise _SourceFailed(Attempt(location, f"has {size} bytes, expected {resource.size}"))
    label = f"{resource.dataset}/{resource.filename}"
    with writing(part), open(part, "wb") as out, progress_bar(label, size, 0, progress) as bar:
        while chunk := source.read(CHUNK_SIZE):
            out.write(chunk)
            bar.update(len(chunk))
