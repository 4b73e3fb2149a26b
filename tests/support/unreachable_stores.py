"""`glyphforge cache ls` of a data dir whose store refuses connections, run in the background (`unreachable_listings`).

Each command waits out its client's retries (gcsfs's own: about 35 s; glyphforge's on S3: about 10 s)
before it fails. Started when the session starts, they wait while other tests run; the test named in
`TAKERS` takes its scheme's result.
"""
from __future__ import annotations

import importlib.util
import socket
from collections.abc import Iterator

import pytest

from support.background_run import BackgroundRun

#: The test that takes each scheme's listing, and the module its client needs.
TAKERS = {"gs": ("test_an_unreachable_gcs_endpoint_is_one_clear_error_after_gcsfs_own_retries", "gcsfs"),
          "s3": ("test_an_unreachable_store_is_one_clear_error", "s3fs")}


def _environment(scheme: str, endpoint: str) -> dict[str, str]:
    """What points the scheme's client at ``endpoint``, with credentials (S3's secret must never be printed)."""
    if scheme == "gs":
        return {"STORAGE_EMULATOR_HOST": endpoint, "FSSPEC_GS_TOKEN": "anon",
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "sekrit-4711",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "2"}


@pytest.fixture(scope="session", autouse=True)
def unreachable_listings(request: pytest.FixtureRequest) -> Iterator[dict[str, BackgroundRun]]:
    """``{scheme: the listing of <scheme>://gf-nowhere/data}``, for each scheme whose taker the session runs.

    Declared in ``tests/conftest.py``. Each store is a port of 127.0.0.1 bound and never listened on.
    Under pytest-xdist every worker collects every test, so each worker starts them (a second or two of
    CPU each); the worker that runs a taker takes its result, the others' are killed at the end.
    """
    names = {item.name for item in request.session.items}
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with closed:
        listings = {scheme: BackgroundRun("glyphforge", "cache", "ls", "--data-dir", f"{scheme}://gf-nowhere/data",
                                          env=_environment(scheme, endpoint))
                    for scheme, (taker, module) in TAKERS.items()
                    if taker in names and importlib.util.find_spec(module) is not None}
        yield listings
        for listing in listings.values():
            listing.stop()
