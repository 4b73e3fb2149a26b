"""A free TCP port on 127.0.0.1, for the servers the tests start (S3, GCS, torchrun's rendezvous)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now (the OS picks it; free again once this returns)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
