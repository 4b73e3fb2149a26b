"""How glyphforge sorts a store's failures: worth another try (`_Transient`) or not (`_Permanent`), or one of Python's.

`_Transient`, `_Permanent` and `_Short` are private signals between the backends and
`glyphforge.storage.backend.Backend.retried`, which turns each into an error of `glyphforge.storage.retries`: none
reaches a user.

`sorted_failure` turns what a store raises (with what each backend knows of its client's errors:
`glyphforge.storage.backend.Backend.sorted_failure`) and `status_failure` what an HTTP status
means into one vocabulary: ``FileNotFoundError``, ``PermissionError``, `_Transient` (retried by
`glyphforge.storage.backend.Backend.retried`) or `_Permanent`. A reason quotes
no secret (`glyphforge.urls.redacted`).
"""
from __future__ import annotations

from glyphforge.urls import redacted

__all__ = ["reason", "sorted_failure", "status_failure"]

#: HTTP statuses worth retrying.
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class _Transient(Exception):
    """A failure worth another try; ``retry_after`` is the server's wish, in seconds."""

    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.why, self.retry_after = why, retry_after


class _Permanent(Exception):
    """A failure no retry fixes (the message says what the server did)."""


class _Short(_Permanent):
    """The object is shorter than the range asked for."""


def status_failure(status: int, answer: str, retry_after: float | None = None) -> Exception:
    """What an HTTP ``status`` other than 200 and 206 means; ``answer`` is the server's ("503 Slow Down")."""
    if status == 404 or status == 410:
        return FileNotFoundError(f"the server answered {answer} (no such file)")
    if status in (401, 403):
        return PermissionError(f"HTTP {answer}")
    if status in _TRANSIENT_STATUS:
        return _Transient(f"the server answered {answer}", retry_after)
    return _Permanent(f"the server answered {answer}. Check the URL")


def sorted_failure(error: Exception) -> Exception:
    """Return ``error`` as glyphforge sorts it, or ``error`` itself when it is none of these.

    A FileNotFoundError or PermissionError stays as it is; an ``OSError`` or a timeout becomes a
    `_Transient` failure. A backend sorts its store client's own errors first
    (`glyphforge.storage.backend.Backend.store_failure`: aiohttp's, botocore's, gcsfs's).
    """
    if isinstance(error, (FileNotFoundError, PermissionError)):
        return error
    if isinstance(error, (OSError, TimeoutError)):
        return _Transient(reason(error))
    return error


def reason(error: BaseException) -> str:
    """A short reason: the error's own words without its URL-bearing arguments."""
    text = str(error.args[0]) if error.args else type(error).__name__
    return redacted(text.splitlines()[0] if text else type(error).__name__)
