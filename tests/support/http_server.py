"""A real HTTP file server on 127.0.0.1 with Range support and fault injection.

Use it as a context manager or through the ``http_server`` fixture::

    from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)

    def test_something(http_server):
        http_server.add("emnist/gzip.zip", data)
        http_server.fail("emnist/gzip.zip", 503, times=2, retry_after="0")
        url = http_server.url("emnist/gzip.zip")
        ...
        assert http_server.requests("emnist/gzip.zip") == 3

Paths are given without a leading slash. Files come from a dict (``add``) and/or a
directory (``directory=``); anything else is a 404. Faults are per path and can be
combined: ``fail`` (any status, N times, optional Retry-After), ``drop_after`` (close
the connection after N body bytes, N times), ``corrupt`` (flip one byte, same size; in
every answer or only in answers to Range requests), ``drip`` (send N bytes, then pause),
``ignore_range`` (always answer 200 with the whole file), ``content_type``
(e.g. ``text/html``), ``redirect`` and ``hold`` (answer only once an event is set).
Every request is logged, and the body bytes actually written are counted per path.
"""
from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_HOLD_TIMEOUT = 30.0


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it (``authorization``: its Authorization header, HTTP basic auth's)."""

    method: str
    path: str
    range: str | None
    status: int
    authorization: str | None = None


@dataclass
class _Faults:
    fail_status: int = 0
    fail_times: int | None = 0
    retry_after: str | None = None
    drop_after: int | None = None
    drop_times: int = 0
    corrupt: bool = False
    corrupt_ranges_only: bool = False
    drip_bytes: int = 0
    drip_every: float = 0.0
    ignore_range: bool = False
    content_type: str = "application/octet-stream"
    redirect_to: str | None = None
    redirect_status: int = 302
    hold: threading.Event | None = None


class LocalHTTPServer:
    """A threading HTTP/1.1 file server on 127.0.0.1 (see the module docstring).

    Parameters
    ----------
    files
        Initial ``{path: bytes}`` to serve.
    directory
        A directory whose files are served too (``<directory>/<path>``).
    chunk_size
        Body bytes written per ``write``.
    """

    def __init__(
        self,
        files: Mapping[str, bytes] | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        chunk_size: int = 8192,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.chunk_size = chunk_size
        self.log: list[RequestRecord] = []
        self._files: dict[str, bytes] = dict(files or {})
        self._faults: dict[str, _Faults] = {}
        self._bytes: Counter[str] = Counter()
        self._received: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------
    def start(self) -> LocalHTTPServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release held responses, stop serving and close the socket."""
        for faults in self._faults.values():
            if faults.hold is not None:
                faults.hold.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LocalHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        return f"{self.base_url}/{path}"

    # content and faults ----------------------------------------------------
    def add(self, path: str, data: bytes) -> None:
        """Serve ``data`` at ``path``."""
        self._files[path] = data

    def fail(self, path: str, status: int, *, times: int | None = 1, retry_after: str | None = None) -> None:
        """Answer ``status`` to the next ``times`` requests (None: always), with Retry-After if given."""
        self._set(path, fail_status=status, fail_times=times, retry_after=retry_after)

    def drop_after(self, path: str, nbytes: int, *, times: int = 1) -> None:
        """In the next ``times`` responses, close the connection after ``nbytes`` body bytes."""
        self._set(path, drop_after=nbytes, drop_times=times)

    def corrupt(self, path: str, *, ranges_only: bool = False) -> None:
        """Serve the file with its middle byte flipped (same size, wrong hash).

        With ``ranges_only``, only answers to Range requests are corrupt, like a file
        that changed on the server between a dropped download and its resume.
        """
        self._set(path, corrupt=True, corrupt_ranges_only=ranges_only)

    def drip(self, path: str, nbytes: int, every: float) -> None:
        """Send bodies ``nbytes`` at a time, pausing ``every`` seconds after each piece (a throttled server)."""
        self._set(path, drip_bytes=nbytes, drip_every=every)

    def ignore_range(self, path: str) -> None:
        """Ignore Range headers: always answer 200 with the whole file."""
        self._set(path, ignore_range=True)

    def content_type(self, path: str, content_type: str) -> None:
        """Serve ``path`` with this Content-Type (e.g. ``"text/html; charset=utf-8"``)."""
        self._set(path, content_type=content_type)

    def redirect(self, path: str, target_path: str, *, status: int = 302) -> None:
        """Redirect requests for ``path`` to ``target_path`` on this server."""
        self._set(path, redirect_to=target_path, redirect_status=status)

    def hold(self, path: str) -> threading.Event:
        """Make requests for ``path`` wait until the returned event is set."""
        event = threading.Event()
        self._set(path, hold=event)
        return event

    # counters ----------------------------------------------------------------
    def requests(self, path: str | None = None) -> int:
        """Number of requests received for ``path`` (all paths when None), answered or not."""
        with self._lock:
            return sum(self._received.values()) if path is None else self._received[path]

    def bytes_served(self, path: str | None = None) -> int:
        """Body bytes actually written for ``path`` (all paths when None)."""
        with self._lock:
            return sum(self._bytes.values()) if path is None else self._bytes[path]

    # internals -------------------------------------------------------------
    def _set(self, path: str, **changes: object) -> None:
        faults = self._faults.setdefault(path, _Faults())
        for name, value in changes.items():
            setattr(faults, name, value)

    def _content(self, path: str) -> bytes | None:
        if path in self._files:
            return self._files[path]
        if self.directory is not None and ".." not in path.split("/"):
            candidate = self.directory / path
            if candidate.is_file():
                return candidate.read_bytes()
        return None

    def _record(self, method: str, path: str, range_header: str | None, status: int,
                authorization: str | None = None) -> None:
        """Log an answered request."""
        with self._lock:
            self.log.append(RequestRecord(method, path, range_header, status, authorization))

    def _count(self, path: str, nbytes: int) -> None:
        with self._lock:
            self._bytes[path] += nbytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LocalHTTPServer

    def handle_error(self, request, client_address) -> None:
        """Clients that hang up mid-request are what the fault tests do: no traceback for those."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _logged_path = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._respond(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._respond(send_body=False)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Keep test output quiet; the owner's ``log`` records every request."""

    def send_response(self, code: int, message: str | None = None) -> None:
        """Log the request before answering, so the log is complete when the client returns."""
        self.server.owner._record(self.command, self._logged_path, self.headers.get("Range"), code,
                                  self.headers.get("Authorization"))
        super().send_response(code, message)

    def _respond(self, *, send_body: bool) -> None:
        owner = self.server.owner
        path = unquote(urlsplit(self.path).path).lstrip("/")
        range_header = self.headers.get("Range")
        with owner._lock:
            owner._received[path] += 1
        faults = owner._faults.get(path, _Faults())
        if faults.hold is not None:
            faults.hold.wait(_HOLD_TIMEOUT)
        self._logged_path = path
        try:
            self._answer(owner, path, faults, range_header, send_body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _answer(
        self, owner: LocalHTTPServer, path: str, faults: _Faults, range_header: str | None, send_body: bool
    ) -> None:
        if faults.redirect_to is not None:
            self._short(faults.redirect_status, {"Location": owner.url(faults.redirect_to)})
            return
        with owner._lock:
            failing = faults.fail_status and (faults.fail_times is None or faults.fail_times > 0)
            if failing and faults.fail_times is not None:
                faults.fail_times -= 1
        if failing:
            extra = {"Retry-After": faults.retry_after} if faults.retry_after is not None else {}
            self._short(faults.fail_status, extra)
            return
        data = owner._content(path)
        if data is None:
            self._short(404)
            return
        if faults.corrupt and data and (range_header or not faults.corrupt_ranges_only):
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
        status, start, end = 200, 0, len(data)
        headers = {"Content-Type": faults.content_type, "Accept-Ranges": "none" if faults.ignore_range else "bytes"}
        if range_header and not faults.ignore_range:
            match = _RANGE.match(range_header.strip())
            first = int(match.group(1)) if match else len(data)
            if first >= len(data):
                self._short(416, {"Content-Range": f"bytes */{len(data)}"})
                return
            last = min(int(match.group(2)), len(data) - 1) if match.group(2) else len(data) - 1
            status, start, end = 206, first, last + 1
            headers["Content-Range"] = f"bytes {start}-{last}/{len(data)}"
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(end - start)}.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self._send_body(owner, path, faults, data[start:end])

    def _send_body(self, owner: LocalHTTPServer, path: str, faults: _Faults, body: bytes) -> None:
        with owner._lock:
            dropping = faults.drop_after is not None and faults.drop_times > 0
            if dropping:
                faults.drop_times -= 1
        limit = faults.drop_after if dropping else len(body)
        piece = faults.drip_bytes or owner.chunk_size
        sent = 0
        while sent < min(limit, len(body)):
            chunk = body[sent:min(sent + piece, limit)]
            owner._count(path, len(chunk))  # before writing: counts are final when the client has the bytes
            self.wfile.write(chunk)
            sent += len(chunk)
            if faults.drip_bytes:
                time.sleep(faults.drip_every)
        self.wfile.flush()
        if dropping:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _short(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        """Answer with a short text body."""
        body = f"{status} {self.responses.get(status, ('',))[0]}\n".encode()
        self.send_response(status)
        all_headers = {"Content-Type": "text/plain", **(headers or {}), "Content-Length": str(len(body))}
        for name, value in all_headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture
def http_server() -> Iterator[LocalHTTPServer]:
    """A started :class:`LocalHTTPServer` with no files; stopped after the test."""
    with LocalHTTPServer() as server:
        yield server
