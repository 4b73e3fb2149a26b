"""The fsspec backend: object stores (``s3://``, ``gs://``) and any fsspec protocol, read with ranged ``cat_file``.

A range is fetched exactly (no read-ahead); a whole object is read up to `Backend.whole_limit`; a listing is
fresh (fsspec's listing cache is dropped first). What each store's client raises is sorted here:
aiohttp's connection errors (s3fs, gcsfs, HTTP listings) are transient; botocore's connection
errors too, and its missing credentials a refusal (`S3Backend`); gcsfs's 403 and HTTP errors as
their status says (`GcsBackend`). gcsfs retries transient failures itself (6 tries over about
35 s), so glyphforge does not again (`Backend.tries_itself`), or a store that is down would take
minutes to name.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from glyphforge.storage.backend import Backend
from glyphforge.storage.read_failures import _Permanent, _Short, _Transient, reason, status_failure
from glyphforge.storage.retries import RetryPolicy
from glyphforge.urls import SUPPORTED_TEXT, MalformedURLError, UnsupportedURLError, redacted

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["FsspecBackend", "GcsBackend", "S3Backend"]

#: What gcsfs's FileNotFoundError holds for a 404 on a bucket's own resource (listing its objects, uploading
#: one): ``b/<bucket>/o``, alone or at the end of the API URL. A 404 on one object (``.../b/<bucket>/o/<name>``)
#: does not say whether the bucket exists.
_GCS_BUCKET_RESOURCE = re.compile(r"(?:^|/)b/[^/]+/o$")


class FsspecBackend(Backend):
    """A URL read and written with its fsspec filesystem (see the module docstring)."""

    #: The fsspec protocol (None: the URL's scheme).
    protocol: ClassVar[str | None] = None
    #: The extra that installs the filesystem's package, for the message when it is missing.
    extra: ClassVar[str | None] = None

    @property
    def fs(self) -> AbstractFileSystem:
        """The fsspec filesystem of the URL (fsspec caches instances per options and process).

        Raises
        ------
        UnsupportedURLError
            fsspec has no filesystem for the scheme, or its package is not installed (the
            message names the extra to install).
        """
        import fsspec

        try:
            return fsspec.filesystem(self.protocol or self.scheme, **self.storage_options)
        except (ImportError, ValueError) as error:
            hint = f"pip install '{self.extra}'" if self.extra else f"give {SUPPORTED_TEXT}"
            raise UnsupportedURLError(f"cannot open {redacted(self.url)}: {error}. {hint}") from None

    @property
    def path(self) -> str:
        """The path of the URL on its filesystem (as fsspec names it: ``bucket/data`` for ``s3://bucket/data``)."""
        import fsspec

        try:
            return str(fsspec.get_filesystem_class(self.protocol or self.scheme)._strip_protocol(self.url))
        except (ImportError, ValueError):
            return str(self.fs._strip_protocol(self.url))  # raises, naming the extra

    def read_once(self, start: int | None, end: int | None, policy: RetryPolicy) -> bytes:
        """One ranged ``cat_file`` of the object (or a whole read of at most `whole_limit` bytes)."""
        fs, path = self.fs, self.path
        data: bytes = self.classified(lambda: fs.cat_file(path, start=start, end=end)
                                      if start is not None else self._whole(fs, path, self.whole_limit))
        if start is not None and end is not None and len(data) != end - start:
            raise _Short(f"the object gave {len(data):,} bytes for a range of {end - start:,}: it is shorter than "
                        "expected (damaged, or replaced by another)")
        return data

    @staticmethod
    def _whole(fs: AbstractFileSystem, path: str, limit: int) -> bytes:
        """The object's bytes, refused past ``limit`` before more is read (its size as the store says it)."""
        fs.invalidate_cache(path)
        with fs.open(path, "rb") as stream:
            data: bytes = stream.read(limit + 1)
        if len(data) > limit:
            raise _Permanent(f"the object holds more than the {limit:,} bytes a whole read takes")
        return data

    def size_once(self, policy: RetryPolicy) -> int | None:
        """fsspec's ``info`` of the object, fresh."""
        return int(self.classified(lambda: self.fs.info(self.path, refresh=True)["size"]))

    def names_once(self) -> list[str]:
        """One fresh ``ls`` of the folder."""
        fs, path = self.fs, self.path
        fs.invalidate_cache(path)
        try:
            paths = self.classified(lambda: fs.ls(path, detail=False))
        except FileNotFoundError as error:
            if self.is_missing_bucket(error):
                raise
            return []
        return sorted(str(name).rstrip("/").rsplit("/", 1)[-1] for name in paths)

    def write(self, data: bytes) -> None:
        """One ``pipe_file``: a store's put makes the whole object at once."""
        self.fs.pipe_file(self.path, data)

    def upload(self, source: Path, *, sent: Callable[[int], object] | None = None, **options: Any) -> None:
        """One ``put_file`` (``options``: e.g. s3fs's ``chunksize`` and ``max_concurrency`` of a multipart upload)."""
        if sent is not None:  # fsspec's stores take no None: their default is a no-op callback
            from glyphforge.storage.upload_progress import SentCallback  # imports fsspec

            options["callback"] = SentCallback(sent)
        self.fs.put_file(os.fspath(source), self.path, **options)

    def files(self) -> dict[str, dict[str, Any]]:
        """One fresh ``ls(detail=True)`` of the folder, its files by name."""
        fs, path = self.fs, self.path
        fs.invalidate_cache(path)
        try:
            listed = fs.ls(path, detail=True)
        except FileNotFoundError:
            return {}
        return {str(info["name"]).rstrip("/").rsplit("/", 1)[-1]: info for info in listed if info.get("type") == "file"}

    def sizes_below(self) -> dict[str, int]:
        """One fresh ``find(detail=True)`` below the URL: each object's size by its path below it."""
        fs, root = self.fs, self.path.rstrip("/")
        fs.invalidate_cache(root)
        try:
            found = fs.find(root, detail=True)
        except FileNotFoundError as error:
            if self.is_missing_bucket(error):
                raise
            return {}
        return {str(path)[len(root) + 1:]: int(info.get("size") or 0) for path, info in found.items()
                if str(path).startswith(root + "/")}

    def read_whole(self) -> bytes:
        """One ``cat_file`` of the object."""
        data: bytes = self.fs.cat_file(self.path)
        return data

    def open_read(self, block_size: int) -> BinaryIO:
        """fsspec's ``open`` of the object, for reading."""
        opened: BinaryIO = self.fs.open(self.path, "rb", block_size=block_size)
        return opened

    def remove(self, names: Iterable[str]) -> None:
        """One ``rm`` of the objects, then ``rmdir`` of the folder when it is a directory left empty (``file://``)."""
        fs, path = self.fs, self.path
        doomed = [self.below(name).path for name in names]
        if doomed:
            fs.rm(doomed)
        fs.invalidate_cache(path)
        if fs.isdir(path) and not fs.ls(path):
            fs.rmdir(path)

    def read_objects(self, names: Iterable[str]) -> dict[str, bytes | Exception]:
        """One multi-object ``cat`` (concurrent on an object store)."""
        paths = {self.below(name).path: name for name in names}
        if not paths:
            return {}
        read = self.fs.cat(list(paths), on_error="return")
        return {name: read[path] for path, name in paths.items() if path in read}

    def check_client(self) -> None:
        """Open the filesystem (no connection): an unknown protocol or a missing package fails, naming the extra."""
        self.fs  # noqa: B018

    @classmethod
    def store_failure(cls, error: Exception) -> Exception | None:
        """aiohttp's errors (the client of s3fs, gcsfs and fsspec's HTTP): a connection that failed, transient.

        Sorted before Python's OSError: aiohttp's are OSErrors whose words are not readable.
        """
        if type(error).__module__.startswith("aiohttp"):
            return _Transient(f"the connection failed ({type(error).__name__})")
        return None


class _BucketStore(FsspecBackend):
    """An object store whose URLs name a bucket first: ``scheme://BUCKET/prefix``."""

    #: The store's rules for a bucket name, in words (`bucket_problem` checks them).
    bucket_rule: ClassVar[str]

    @classmethod
    def check(cls, url: str) -> str:
        """Refuse a URL naming no bucket, or a bucket the store would refuse (`bucket_problem`)."""
        scheme, rest = url.split("://", 1)
        bucket = rest.split("/", 1)[0]
        if not bucket:
            raise MalformedURLError(f"{url} names no bucket: write {scheme}://BUCKET/prefix")
        problem = cls.bucket_problem(bucket)
        if problem:
            raise MalformedURLError(f"{url}: {bucket!r} is not a bucket name {scheme}:// takes: {problem} "
                                    f"({cls.bucket_rule}). Check the URL, {scheme}://BUCKET/prefix")
        return url

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        """The rule of the store that ``bucket`` breaks, in words; None: the store takes it.

        The rules the stores share: 3 to 63 characters, lower case letters, digits, '.' and '-'
        (`_BUCKET_CHARACTERS` adds what a store also takes), a letter or digit at each end, no
        two dots in a row, not an IP address.
        """
        if not 3 <= len(bucket) <= cls.longest_bucket:
            return f"it has {len(bucket)} characters"
        wrong = sorted({repr(c) for c in bucket if not (c.islower() or c.isdigit() or c in cls.bucket_characters)
                        or not c.isascii()})
        if wrong:
            return f"it holds {', '.join(wrong)}"
        if not (bucket[0].isalnum() and bucket[-1].isalnum()):
            return "it does not start and end with a letter or digit"
        if ".." in bucket:
            return "it has two dots in a row"
        if _IP_ADDRESS.fullmatch(bucket):
            return "it is an IP address"
        return None

    #: The most characters a bucket name may have.
    longest_bucket: ClassVar[int] = 63
    #: What a bucket name may hold besides lower case letters and digits.
    bucket_characters: ClassVar[str] = ".-"


#: A name of four numbers separated by dots: no store takes it for a bucket.
_IP_ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+")


class S3Backend(_BucketStore):
    """``s3://`` with s3fs: botocore's connection errors are transient, its missing credentials a refusal."""

    extra = "glyphforge[s3]"
    takes_part_options = True
    bucket_rule = ("3 to 63 lower case letters, digits, '.' and '-', starting and ending with a letter or digit; see "
                   "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html")
    #: Prefixes and suffixes S3 keeps for itself (access points, aliases, directory and table buckets).
    _RESERVED = (("xn--", "sthree-", "amzn-s3-demo-"), ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"))

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        """The shared rules (`_BucketStore.bucket_problem`), and S3's reserved prefixes and suffixes. S3 made buckets
        of upper case letters and '_' before March 2018; it makes none now, and they cannot be reached by the
        virtual-host addresses s3fs uses, so glyphforge takes none."""
        problem = super().bucket_problem(bucket)
        prefixes, suffixes = cls._RESERVED
        if problem is None and (bucket.startswith(prefixes) or bucket.endswith(suffixes)):
            return "S3 keeps its prefix or suffix for itself"
        return problem

    @classmethod
    def store_failure(cls, error: Exception) -> Exception | None:
        """aiohttp's and botocore's connection errors (transient), botocore's missing credentials (a refusal)."""
        failure = super().store_failure(error)
        if failure is not None:
            return failure
        try:
            from botocore import exceptions
        except ImportError:  # no s3fs here
            return None
        if isinstance(error, (exceptions.HTTPClientError, exceptions.ConnectionError)):
            return _Transient(f"the connection failed ({type(error).__name__})")  # EndpointConnectionError: nobody
        if isinstance(error, (exceptions.NoCredentialsError, exceptions.PartialCredentialsError,
                              exceptions.CredentialRetrievalError)):
            return PermissionError(f"{type(error).__name__}: {error}")
        return None

    @classmethod
    def is_missing_bucket(cls, error: FileNotFoundError) -> bool:
        """s3fs says so in words ("The specified bucket does not exist"); never the bucket's name."""
        return "bucket does not exist" in str(error).lower()


class GcsBackend(_BucketStore):
    """``gs://`` with gcsfs, which retries transient failures itself; its 403 and HTTP errors sorted by status."""

    extra = "glyphforge[gcs]"
    tries_itself = "gcsfs"
    bucket_rule = ("3 to 63 lower case letters, digits, '.', '-' and '_', starting and ending with a letter or digit, "
                   "up to 222 with dots and 63 between two dots; see https://cloud.google.com/storage/docs/buckets")
    longest_bucket = 222
    bucket_characters = ".-_"

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        """The shared rules (`_BucketStore.bucket_problem`), 63 characters between dots, and Google's names kept."""
        problem = super().bucket_problem(bucket)
        if problem is None and max(map(len, bucket.split("."))) > 63:
            return f"it has {len(bucket)} characters" if "." not in bucket else "it has over 63 characters between dots"
        if problem is None and (bucket.startswith("goog") or "google" in bucket or "g00gle" in bucket):
            return "Google keeps names starting with 'goog' or holding 'google' for itself"
        return problem

    def read_once(self, start: int | None, end: int | None, policy: RetryPolicy) -> bytes:
        """As fsspec's; a 404 on one object says nothing of its bucket: one listing more tells
        (`_bucket_is_missing`)."""
        try:
            return super().read_once(start, end, policy)
        except FileNotFoundError as error:
            if not self.is_missing_bucket(error) and self._bucket_is_missing():
                raise _NoBucket(f"{redacted(self.url)}: the bucket does not exist") from None
            raise

    def _bucket_is_missing(self) -> bool:
        """Whether the bucket of the object does not exist, by one listing of the object's folder; a listing that
        fails otherwise (no permission to list, the network) cannot tell: False."""
        fs = self.fs
        folder = self.path.rsplit("/", 1)[0]
        try:
            fs.invalidate_cache(folder)
            fs.ls(folder, detail=False)
        except FileNotFoundError as error:
            return self.is_missing_bucket(error)
        except Exception:  # noqa: BLE001 (the object's own 404 stands)
            return False
        return False

    @classmethod
    def store_failure(cls, error: Exception) -> Exception | None:
        """aiohttp's connection errors (transient), gcsfs's 403 (a plain OSError "Forbidden: <url>": a refusal) and
        its HttpError (as its status says)."""
        failure = super().store_failure(error)
        if failure is not None:
            return failure
        if type(error) is OSError and str(error).startswith("Forbidden: "):
            return PermissionError("HTTP 403 Forbidden")
        try:
            from gcsfs.retry import HttpError
        except ImportError:  # no gcsfs here
            return None
        status = getattr(error, "code", None) if isinstance(error, HttpError) else None
        if not isinstance(status, int):
            return None
        words = reason(error).removesuffix(f", {status}")  # gcsfs appends the status to the message
        return status_failure(status, words if words.startswith(str(status)) else f"{status} {words}")

    @classmethod
    def is_missing_bucket(cls, error: FileNotFoundError) -> bool:
        """gcsfs names the API resource that was not found: a bucket's when a listing or an upload got the 404
        (``b/<bucket>/o``); a read of one object asks with one listing more (`_NoBucket`)."""
        if isinstance(error, _NoBucket):
            return True
        text = str(error.args[0]) if error.args else ""
        return _GCS_BUCKET_RESOURCE.search(text.split("?")[0]) is not None


class _NoBucket(FileNotFoundError):
    """The bucket of the object read does not exist (`GcsBackend._bucket_is_missing` found out)."""
