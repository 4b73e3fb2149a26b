"""The HTTP backend: ``http://`` and ``https://``, read-only, read with ``requests`` (a core dependency).

An answer is checked before its body is read: a range must come back as ``206 Partial Content``
starting at the byte asked for, and a server that ignores ``Range`` (``200`` with the whole
file) is refused rather than downloaded whole. A size is one ``HEAD``. A listing is fsspec's
(links in an HTML page; glyphforge asks none of an HTTP data dir). Every write raises
`glyphforge.storage.backend.ReadOnlyStoreError`. Statuses 408, 425, 429 and 5xx and a dropped
connection are transient (a ``Retry-After`` is honoured); 401 and 403 a refusal; 404 and 410 no
such object.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from glyphforge.storage.fsspec_backend import FsspecBackend
from glyphforge.storage.read_failures import _Permanent, _Short, _Transient, status_failure
from glyphforge.storage.retries import RetryPolicy, content_range, retry_after
from glyphforge.urls import MalformedURLError

if TYPE_CHECKING:
    import requests

__all__ = ["HttpBackend"]

_CHUNK = 1 << 16


class HttpBackend(FsspecBackend):
    """An ``http(s)://`` URL, read-only (see the module docstring)."""

    read_only = True

    @classmethod
    def check(cls, url: str) -> str:
        """Refuse a URL naming no host, or a port that is no number."""
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 (a ValueError when it is no number, or out of range)
        except ValueError:
            raise MalformedURLError(f"{url}: its port is not a number from 0 to 65535") from None
        if not parts.hostname:
            raise MalformedURLError(f"{url} names no host: write {parts.scheme}://HOST/path")
        return url

    def read_once(self, start: int | None, end: int | None, policy: RetryPolicy) -> bytes:
        """One GET (bytes ``[start, end)`` with a Range header), its answer checked."""
        import requests  # here, not at the top: importing it costs ~0.1 s, and most reads are not HTTP

        headers = {"Accept-Encoding": "identity"}
        if start is not None and end is not None:
            headers["Range"] = f"bytes={start}-{end - 1}"
        try:
            with _session().get(self.url, headers=headers, stream=True,
                                timeout=(policy.connect_timeout, policy.read_timeout)) as response:
                _check_status(response)
                expected = _expected_length(response, start, end)
                return _body(response, self.whole_limit if expected is None else expected, expected is not None)
        except requests.exceptions.ChunkedEncodingError:
            raise _Transient("the connection was closed before the whole answer came") from None
        except (requests.ConnectionError, requests.Timeout) as error:
            raise _Transient(f"the connection failed ({type(error).__name__})") from None

    def size_once(self, policy: RetryPolicy) -> int | None:
        """One HEAD: its Content-Length (None when the server does not say)."""
        import requests

        try:
            with _session().head(self.url, headers={"Accept-Encoding": "identity"}, allow_redirects=True,
                                 timeout=(policy.connect_timeout, policy.read_timeout)) as response:
                _check_status(response)
                length = response.headers.get("Content-Length", "")
        except (requests.ConnectionError, requests.Timeout) as error:
            raise _Transient(f"the connection failed ({type(error).__name__})") from None
        return int(length) if length.isdigit() else None

    def write(self, data: bytes) -> None:
        """Refused: glyphforge only reads over HTTP."""
        raise self.refuse_write()

    def upload(self, source: Path, *, sent: Callable[[int], object] | None = None, **options: Any) -> None:
        """Refused: glyphforge only reads over HTTP."""
        raise self.refuse_write()

    def remove(self, names: Iterable[str]) -> None:
        """Refused: glyphforge only reads over HTTP."""
        raise self.refuse_write()


_sessions = threading.local()


def _session() -> requests.Session:
    """This thread's session (kept-alive connections; a session is not shared between threads or processes)."""
    import requests

    session = getattr(_sessions, "session", None)
    if session is None:
        session = _sessions.session = requests.Session()
    return session


def _forget_sessions() -> None:
    """In a forked child (a DataLoader worker): drop the parent's sessions, whose sockets the parent still uses."""
    global _sessions
    _sessions = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sessions)


def _check_status(response: requests.Response) -> None:
    """Raise what an answer that is not 200 or 206 means."""
    if response.status_code not in (200, 206):
        raise status_failure(response.status_code, f"{response.status_code} {response.reason}",
                             retry_after(response.headers.get("Retry-After")))


def _expected_length(response: requests.Response, start: int | None, end: int | None) -> int | None:
    """How many body bytes the answer must hold (None: a whole object); refuses an answer to another range."""
    if start is None or end is None:
        return None
    if response.status_code == 200:
        size = response.headers.get("Content-Length", "unknown")
        raise _Permanent(
            f"the server ignores Range requests (it answered 200 with the whole file, {size} bytes), so every read "
            "would download the whole file. Serve the data from a server that supports Range (any static file "
            "server or object store does), or copy the entry to a local data dir and read it there")
    answered = content_range(response.headers.get("Content-Range"))
    if answered is None or answered.first != start or answered.last is None:
        raise _Permanent(f"the server answered a range other than the one asked for "
                        f"(Content-Range {response.headers.get('Content-Range')!r})")
    if answered.last + 1 < end:
        raise _Short(f"the file ends at byte {answered.last + 1:,}: it is shorter than expected (damaged, or "
                    "replaced by another)")
    return end - start


def _body(response: requests.Response, limit: int, exact: bool) -> bytes:
    """Read the body: at most ``limit`` bytes, exactly that many when ``exact`` (a dropped connection is
    transient)."""
    pieces, size = [], 0
    for piece in response.iter_content(_CHUNK):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise _Permanent(f"the server sent more than the {limit:,} bytes expected")
    if exact and size != limit:
        raise _Transient(f"the connection was closed after {size:,} of {limit:,} bytes")
    return b"".join(pieces)

