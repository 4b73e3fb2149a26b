"""A real GCS JSON API on 127.0.0.1: gcp-storage-emulator, for tests of ``gs://`` data dirs.

Use the module-scoped ``gcs_server`` fixture (one server for the session, started by the first
module that asks, set in the environment for each module's tests; each test makes its own bucket
with ``gcs_server.bucket()``)::

    from support.gcs_server import gcs_server  # noqa: F401 (fixture)

    def test_something(gcs_server):
        url = gcs_server.bucket()           # "gs://gf-gcs-1"
        ...                                  # gcsfs finds the server through the environment

The fixture sets, in ``os.environ`` for the module's tests (and so for the subprocesses
they start), what gcsfs needs to use an emulator, then restores the environment:

* ``STORAGE_EMULATOR_HOST``: gcsfs's (and Google's SDKs') endpoint for an emulator;
* ``FSSPEC_GS_TOKEN=anon``: fsspec's default ``token`` for ``gs://`` (no credentials: the
  emulator takes none, and gcsfs would otherwise look for them, the GCE metadata server included);
* ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``: gcsfs 2026.x asks the Storage Control gRPC API
  the layout of every bucket it touches, which an emulator does not serve: each call would
  wait 60 s for that answer (gcsfs reads this variable when it is imported).

``gcs_server.fs()`` is a fresh gcsfs filesystem on the server.

The emulator reads a multipart upload (gcsfs's for objects under 5 MB) with Python's email
parser, which drops a last ``\r`` of the object's bytes (one object in 256 of random bytes):
`_exact_multipart` reads gcsfs's body as it is sent, so the server stores what it is given.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from support.ports import free_port

#: Bucket numbers, for the whole test session (buckets are named once however many servers run).
_BUCKETS = itertools.count(1)
#: What the fixture puts in the environment, but the endpoint.
ENVIRONMENT = {"FSSPEC_GS_TOKEN": "anon", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}



def _exact_multipart(read_data: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The emulator's request-body reader ``read_data``, but a ``multipart/related`` upload (metadata, then the
    object) is split at its boundary lines, each part's headers at their first blank line, bytes kept as sent."""
    from gcp_storage_emulator import server

    def read(request_handler: Any, query: Any) -> Any:
        content_type = request_handler.headers.get("Content-Type") or ""
        boundary = re.search(r'boundary="?([^";]+)"?', content_type)
        if not content_type.startswith("multipart/related") or boundary is None:
            return read_data(request_handler, query)
        raw = server._decode_raw_data(server._read_raw_data(request_handler), request_handler)
        _, metadata, content, _ = (b"\n" + raw).split(b"\n--" + boundary.group(1).encode())
        parts = []
        for part in (metadata, content):
            crlf = part.startswith(b"\r\n")
            headers, _, body = part.partition(b"\r\n\r\n" if crlf else b"\n\n")
            parts.append((headers.decode(), body[:-1] if crlf and body.endswith(b"\r") else body))
        part_type = re.search(r"Content-Type:\s*([^;\s]+)", parts[1][0], re.IGNORECASE)
        return {"meta": json.loads(parts[0][1]), "content": parts[1][1],
                "content-type": part_type.group(1) if part_type else "application/octet-stream"}

    return read


class LocalGCSServer:
    """gcp-storage-emulator's server, in memory, on a free port of 127.0.0.1 (see the module docstring)."""

    def __init__(self) -> None:
        from gcp_storage_emulator import server
        from gcp_storage_emulator.server import create_server

        if not getattr(server._read_data, "exact_multipart", False):
            server._read_data = _exact_multipart(server._read_data)
            server._read_data.exact_multipart = True  # type: ignore[attr-defined]
        logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)  # it logs every request and 404
        self.port = free_port()
        self._server = create_server("127.0.0.1", self.port, in_memory=True)

    @property
    def endpoint(self) -> str:
        """The server's URL, as ``STORAGE_EMULATOR_HOST`` holds it."""
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The variables a process needs to reach this server with gcsfs."""
        return {**ENVIRONMENT, "STORAGE_EMULATOR_HOST": self.endpoint}

    def start(self) -> LocalGCSServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def fs(self, **options: Any) -> Any:
        """A new gcsfs filesystem on this server (not fsspec's cached instance)."""
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(skip_instance_cache=True, endpoint_url=self.endpoint, token="anon", **options)

    def bucket(self, name: str | None = None) -> str:
        """Make a bucket (a new one per call unless ``name`` is given); return its ``gs://`` URL."""
        name = name or f"gf-gcs-{next(_BUCKETS)}"
        self.fs().mkdir(name)
        return f"gs://{name}"


def _use_gcsfs_core() -> None:
    """Make fsspec open ``gs://`` with gcsfs's plain filesystem, as ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` does.

    The variable only counts when gcsfs is imported: if an earlier test module imported it,
    fsspec would still open its extended filesystem in this process (for the rest of the session).
    """
    import fsspec
    import gcsfs
    from gcsfs.core import GCSFileSystem

    if gcsfs.GCSFileSystem is not GCSFileSystem:
        for protocol in GCSFileSystem.protocol:
            fsspec.register_implementation(protocol, GCSFileSystem, clobber=True)
    GCSFileSystem.clear_instance_cache()  # fsspec's cached instance would still point at an earlier server


@pytest.fixture(scope="session")
def gcs_server_process() -> Iterator[LocalGCSServer]:
    """gcp-storage-emulator on 127.0.0.1 for the whole session (declared in ``tests/conftest.py``; modules use
    `gcs_server`, which puts it in the environment)."""
    for module in ("gcp_storage_emulator", "gcsfs"):
        pytest.importorskip(module, reason="gcp-storage-emulator and gcsfs are in the test extra")
    server = LocalGCSServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gcs_server(gcs_server_process: LocalGCSServer) -> Iterator[LocalGCSServer]:
    """gcp-storage-emulator on 127.0.0.1 (the session's) for one test module, with the environment pointing at it."""
    import fsspec.config

    server = gcs_server_process
    saved = {name: os.environ.get(name) for name in server.environment()}
    saved_conf = fsspec.config.conf.get("gs")
    os.environ.update(server.environment())
    fsspec.config.conf["gs"] = {**(saved_conf or {}), "token": "anon"}  # FSSPEC_GS_TOKEN, in this process
    _use_gcsfs_core()
    try:
        yield server
    finally:
        from gcsfs.core import GCSFileSystem

        GCSFileSystem.clear_instance_cache()
        if saved_conf is None:
            fsspec.config.conf.pop("gs", None)
        else:
            fsspec.config.conf["gs"] = saved_conf
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
