"""What an upstream file is (`Resource`), and what failing to get it raises (`DownloadError`, `HashMismatchError`).

:func:`glyphforge.pipelines.download.fetch` gets a `Resource`; the datasets declare theirs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from glyphforge._checks import check_int
from glyphforge.errors import GlyphforgeError, IntegrityError
from glyphforge.hashes import normalise_hash
from glyphforge.pipelines.http_source import Attempt

__all__ = ["DownloadError", "HashMismatchError", "Resource", "not_upstream"]


@dataclass(frozen=True)
class Resource:
    """One upstream file of a dataset.

    Attributes
    ----------
    dataset
        The dataset it belongs to (``"emnist"``); names its folder in ``raw/`` and on mirrors.
    filename
        A plain file name (``"gzip.zip"``).
    url
        The origin URL (``https://``, ``http://`` or ``file://``).
    hash
        ``"sha256:<hex>"``, ``"md5:<hex>"`` or ``"git-blob-sha1:<hex>"``.
    size
        The size in bytes, when known.
    more_urls
        Other origins of the same bytes, tried in order after ``url`` (MNIST: LeCun's
        original address after the S3 copy).
    """

    dataset: str
    filename: str
    url: str
    hash: str
    size: int | None = None
    more_urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("dataset", "filename"):
            value = getattr(self, name)
            if not value or value in (".", "..") or "/" in value or "\\" in value:
                raise ValueError(f"Resource {name} {value!r} must be a plain name (no '/', not '.' or '..')")
        try:
            object.__setattr__(self, "hash", normalise_hash(self.hash))
        except ValueError as error:
            raise ValueError(f"Resource {self.dataset}/{self.filename}: {error}") from None
        object.__setattr__(self, "more_urls", tuple(self.more_urls))
        for url in (self.url, *self.more_urls):
            if urlsplit(url).scheme.lower() not in ("http", "https", "file"):
                raise ValueError(f"Resource {self.dataset}/{self.filename}: url {url!r} must be http(s):// or file://")
        if self.size is not None:
            object.__setattr__(self, "size", check_int(f"Resource {self.dataset}/{self.filename}: size", self.size, 0))


class DownloadError(GlyphforgeError, RuntimeError):
    """A file could not be obtained; the message lists what was tried and what to do.

    Attributes
    ----------
    resource, target
        The resource, and the path where it may be placed by hand.
    mirrors
        The mirror locations that were consulted, in order.
    attempts
        One :class:`Attempt` per source that failed.
    """

    def __init__(
        self,
        message: str,
        *,
        resource: Resource | None = None,
        target: Path | None = None,
        mirrors: tuple[str, ...] = (),
        attempts: tuple[Attempt, ...] = (),
    ) -> None:
        super().__init__(message)
        self.resource = resource
        self.target = target
        self.mirrors = mirrors
        self.attempts = attempts


class HashMismatchError(DownloadError, IntegrityError):
    """A file has the wrong hash: a download (deleted), or a local copy (left as it is).

    Attributes
    ----------
    expected, actual
        Hash strings; ``expected_size`` (None when not pinned) and ``actual_size`` in bytes.
    url, final_url
        The source of the (first) bad file, and where redirects ended.
    """

    @property
    def mismatch(self) -> Attempt:
        """The first attempt that delivered wrong content."""
        return next(attempt for attempt in self.attempts if attempt.actual_hash)

    @property
    def expected(self) -> str:
        return self.resource.hash if self.resource else ""

    @property
    def expected_size(self) -> int | None:
        return self.resource.size if self.resource else None

    @property
    def actual(self) -> str:
        return self.mismatch.actual_hash or ""

    @property
    def actual_size(self) -> int | None:
        return self.mismatch.actual_size

    @property
    def url(self) -> str:
        return self.mismatch.source

    @property
    def final_url(self) -> str | None:
        return self.mismatch.final_url


def not_upstream(path: Path, resource: Resource, actual: str, advice: str) -> HashMismatchError:
    """Return the error for a local file ``path`` whose hash, ``actual``, is not ``resource``'s.

    Parameters
    ----------
    path
        The file (a copy given or placed by the user; it is left as it is).
    resource
        The upstream file it was meant to be.
    actual
        Its hash, as :func:`glyphforge.hashes.check_hash` gives it.
    advice
        What to do, appended to the message.
    """
    size = path.stat().st_size
    pinned = f"{resource.size:,} bytes" if resource.size is not None else "size not pinned"
    return HashMismatchError(
        f"{path} is not {resource.url}: its hash is {actual} ({size:,} bytes), expected {resource.hash} "
        f"({pinned}). {advice}",
        resource=resource,
        target=path,
        attempts=(Attempt(str(path), "hash mismatch", actual_hash=actual, actual_size=size),),
    )
