"""A dataset ``served`` registered for a test, whose files come from a local HTTP server (nothing reaches the internet).

``with served_dataset(http_server, files, summary):`` registers it (``prepare`` fetches each file from
``origin/<name>`` on the server, through the context's mirrors, then caches their bytes) and unregisters
it afterwards. The caller adds to the server what each file's origin and mirrors serve.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np

from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import Resource

from support.hashes import bytes_hash
from support.http_server import LocalHTTPServer


@contextlib.contextmanager
def served_dataset(server: LocalHTTPServer, files: Mapping[str, bytes], summary: str) -> Iterator[list[Resource]]:
    """Register ``served`` with ``files`` (name -> bytes) at ``origin/<name>`` of ``server``; yield its resources."""
    resources = [Resource("served", name, server.url(f"origin/{name}"), bytes_hash(data, "sha256"), len(data))
                 for name, data in files.items()]

    def prepare_served(*, shapes=(), context=None, **options):
        context = DataContext.resolve(context)
        paths = [fetch(resource, context.raw_dir("served"), mirrors=context.mirrors, offline=context.offline,
                       progress=False) for resource in resources]

        def write(writer):
            writer.write("bytes.pklz", np.frombuffer(b"".join(path.read_bytes() for path in paths), np.uint8))
            writer.meta["n_images"] = len(paths)

        return [context.store.get_or_create("served", {"files": len(paths)}, write)]

    registry.register(registry.DatasetRecord(
        name="served", summary=summary, prepare=prepare_served, load=prepare_served, preview=prepare_served,
        resources=lambda: resources))
    try:
        yield resources
    finally:
        registry.unregister("served")
