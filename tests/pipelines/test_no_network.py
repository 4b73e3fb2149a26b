"""Downloads on a machine without network (issue 30, row 17): a host name that does not resolve.

Such a source is tried once, not five times with backoff, and the error says what to do
without the network: place the files and use ``--offline``, or give a ``--mirror``. The
library is pointed at ``.invalid`` host names (that top-level domain never resolves); the
real ``prepare-data`` runs in a network namespace of its own with no network at all
(``unshare --net``, which needs root), against the datasets' real origins.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess

import pytest

from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import DownloadError, Resource

from support.cli import BIN
from support.hashes import bytes_hash

HOSTS = ("nonexistent.invalid", "also.nonexistent.invalid")


@pytest.fixture
def unresolvable():
    """The ``.invalid`` host names, checked not to resolve here (skip where a resolver answers for them)."""
    for host in HOSTS:
        try:
            socket.getaddrinfo(host, 80)
        except socket.gaierror:
            continue
        pytest.skip(f"{host} resolves on this machine (a resolver that answers for every name)")
    return HOSTS


def test_a_host_that_does_not_resolve_is_tried_once_and_the_error_says_offline_or_mirror(unresolvable, tmp_path,
                                                                                      caplog):
    first, second = unresolvable
    resource = Resource("ds", "f.bin", f"http://{first}/ds/f.bin", bytes_hash(b"data", "sha256"),
                        more_urls=(f"https://{second}/f.bin",))
    caplog.set_level(logging.DEBUG)  # urllib3 logs each connection it starts: one per attempt
    with pytest.raises(DownloadError) as raised:
        fetch(resource, tmp_path / "raw" / "ds", progress=False)  # the default policy: 5 attempts per source
    started = [record.getMessage() for record in caplog.records if record.name == "urllib3.connectionpool"
               and record.getMessage().startswith("Starting new")]
    assert started == [f"Starting new HTTP connection (1): {first}:80",
                       f"Starting new HTTPS connection (1): {second}:443"]
    assert not [record for record in caplog.records if " retry " in record.getMessage()]
    assert [attempt.unresolved_host for attempt in raised.value.attempts] == [first, second]
    message = str(raised.value)
    assert f"  - {resource.url}: the host name {first} does not resolve ([Errno " in message
    assert "this machine has no network or no DNS (not retried)" in message
    assert (f"{first}, {second} did not resolve: this machine has no network (or no DNS). To work without it, place "
            f"the files of ds in {tmp_path / 'raw' / 'ds'} and run with --offline") in message
    assert "give a mirror this machine can reach (--mirror URL or GLYPHFORGE_MIRROR" in message
    assert sorted(os.listdir(tmp_path / "raw" / "ds")) == [".f.bin.lock"]  # nothing half-written


def _no_network_reason() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None:
        return "runs prepare-data in a network namespace of its own (unshare --net), which needs root"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    return f"unshare --net fails here: {probe.stderr.strip()}" if probe.returncode else None


@pytest.mark.parametrize(("datasets", "origins", "placed"), [
    ("all", ["raw.githubusercontent.com"], "backgrounds"),  # the first dataset of all: one origin
    ("mnist", ["ossci-datasets.s3.amazonaws.com", "yann.lecun.com"], "mnist"),  # two origins, each tried once
])
def test_prepare_data_without_network_fails_at_once_suggesting_offline_and_mirror(datasets, origins, placed,
                                                                                tmp_path):
    reason = _no_network_reason()
    if reason:
        pytest.skip(reason)
    data_dir = tmp_path / "data"
    done = subprocess.run(["unshare", "--net", str(BIN / "prepare-data"), datasets, "--data-dir", str(data_dir),
                           "--no-warmup"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GLYPHFORGE_MIRROR": "", "GLYPHFORGE_OFFLINE": ""})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not re.search(r"retry \d+/\d+", done.stderr), done.stderr  # each origin tried once: no retry logged
    assert re.findall(r"the host name (\S+) does not resolve", done.stderr) == origins
    assert f"place the files of {placed} in {data_dir / 'raw' / placed} and run with --offline" in done.stderr
    assert "--mirror URL" in done.stderr
