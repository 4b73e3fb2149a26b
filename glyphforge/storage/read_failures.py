"""How glyphforge sorts a store's failures: worth another try (`Transient`) or not (`Permanent`), or one of Python's.

`sorted_failure` turns what fsspec's filesystems raise (aiohttp's and botocore's connection
errors, gcsfs's HTTP errors, botocore's missing credentials) and `status_failure` what an HTTP
status means into one vocabulary: ``FileNotFoundError``, ``PermissionError``, `Transient`
(retried by `glyphforge.storage.reads`) or `Permanent`. `shown` cuts secrets out of any text
a message quotes.
"""
from __future__ import annotations

import re

__all__ = ["Permanent", "Short", "Transient", "reason", "shown", "sorted_failure", "status_failure"]

#: HTTP statuses worth retrying.
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class Transient(Exception):
    """A failure worth another try; ``retry_after`` is the server's wish, in seconds."""

    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.why, self.retry_after = why, retry_after


class Permanent(Exception):
    """A failure no retry fixes (the message says what the server did)."""


class Short(Permanent):
    """The object is shorter than the range asked for."""


def status_failure(status: int, answer: str, retry_after: float | None = None) -> Exception:
    """What an HTTP ``status`` other than 200 and 206 means; ``answer`` is the server's ("503 Slow Down")."""
    if status == 404 or status == 410:
        return FileNotFoundError(f"the server answered {answer} (no such file)")
    if status in (401, 403):
        return PermissionError(f"HTTP {answer}")
    if status in _TRANSIENT_STATUS:
        return Transient(f"the server answered {answer}", retry_after)
    return Permanent(f"the server answered {answer}. Check the URL")


def sorted_failure(error: Exception) -> Exception:
    """Return the store's ``error`` as glyphforge sorts it, or ``error`` itself when it is none of these.

    A FileNotFoundError or PermissionError stays as it is; a connection that failed, an
    ``OSError`` or a timeout becomes a `Transient` failure; gcsfs's 403 and HTTP errors and
    botocore's missing credentials become the FileNotFound-, PermissionError, `Transient` or
    `Permanent` their status means. `store_call` and `read_bytes` retry the transient ones;
    the write side (`glyphforge.storage.store_errors`) names them all at once.
    """
    if isinstance(error, (FileNotFoundError, PermissionError)):
        return error
    if _is_connection_error(error):  # before OSError: aiohttp's are OSErrors whose words are not readable
        return Transient(f"the connection failed ({type(error).__name__})")
    if _is_gcs_refusal(error):
        return PermissionError("HTTP 403 Forbidden")
    if isinstance(error, (OSError, TimeoutError)):
        return Transient(reason(error))
    status = _gcs_status(error)
    if status is not None:
        words = reason(error).removesuffix(f", {status}")  # gcsfs appends the status to the message
        return status_failure(status, words if words.startswith(str(status)) else f"{status} {words}")
    if _is_credentials_error(error):
        return PermissionError(f"{type(error).__name__}: {error}")
    return error


def _is_connection_error(error: Exception) -> bool:
    """Whether ``error`` is aiohttp's (s3fs, gcsfs) or botocore's word for a connection that failed or timed out."""
    if type(error).__module__.startswith("aiohttp"):
        return True
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError
    except ImportError:  # no s3fs here
        return False
    return isinstance(error, (HTTPClientError, BotoConnectionError))  # EndpointConnectionError: nobody answers


def _is_gcs_refusal(error: Exception) -> bool:
    """Whether ``error`` is gcsfs's word for a 403: a plain OSError "Forbidden: <url>"."""
    return type(error) is OSError and str(error).startswith("Forbidden: ")


def _gcs_status(error: Exception) -> int | None:
    """The HTTP status of gcsfs's HttpError (a GCS answer it does not turn into a Python error), else None."""
    try:
        from gcsfs.retry import HttpError
    except ImportError:  # no gcsfs here
        return None
    code = getattr(error, "code", None) if isinstance(error, HttpError) else None
    return code if isinstance(code, int) else None


def _is_credentials_error(error: Exception) -> bool:
    """Whether ``error`` is botocore's word for credentials it could not find or complete."""
    try:
        from botocore.exceptions import CredentialRetrievalError, NoCredentialsError, PartialCredentialsError
    except ImportError:
        return False
    return isinstance(error, (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError))


def reason(error: BaseException) -> str:
    """A short reason: the error's own words without its URL-bearing arguments."""
    text = str(error.args[0]) if error.args else type(error).__name__
    return shown(text.splitlines()[0] if text else type(error).__name__)


def shown(text: str) -> str:
    """``text`` without URL query strings (a signed URL's signature is a secret) or user:password@ parts."""
    return re.sub(r"\?[^\s'\"]*", "?...", re.sub(r"://[^/@\s]*@", "://", text))
