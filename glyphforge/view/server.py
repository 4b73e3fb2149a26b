"""Serving the viewer: a socket on the loopback (a free port unless one is given), uvicorn running the app."""
from __future__ import annotations

import ipaddress
import socket
import sys
import webbrowser
from collections.abc import Callable

import uvicorn

from glyphforge.errors import ArgumentError
from glyphforge.view.app import create_app
from glyphforge.view.catalog import Catalog

#: Where the viewer listens unless told otherwise: this machine only.
LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback only (``127.0.0.0/8``, ``::1`` or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one) and listening; an `ArgumentError` when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise ArgumentError(f"cannot listen on {host}:{port}: {error.strerror or error}; give another --port (or none "
                            "for a free one) or another --host") from None
    return sock


def address(sock: socket.socket) -> str:
    """The URL of the page a listening ``sock`` serves."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(catalog: Catalog, sock: socket.socket, *, fragment: str = "", open_browser: bool = True,
          say: Callable[[str], None] = print) -> None:
    """Serve the viewer of ``catalog`` on the listening ``sock`` until interrupted; say its address first (with
    ``fragment``, the page of a dataset) and open it in the browser unless ``open_browser`` is False."""
    host = sock.getsockname()[0]
    url = address(sock) + fragment
    app = create_app(catalog, loopback=is_loopback(host))
    # stopping waits at most 2 s for requests in flight (a page reading a large shard), then ends them
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=2))
    say(f"glyphforge view: {catalog.context.remote or catalog.context.data_dir} at {url} (Ctrl-C stops)")
    sys.stdout.flush()
    if open_browser:
        webbrowser.open(url)
    server.run(sockets=[sock])
