"""Downloads never wait silently or for ever: retries and waits are logged, and every wait is bounded.

Against the real HTTP server on 127.0.0.1 (``support.http_server``) and real processes.
"""
from __future__ import annotations

import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glyphforge.context import DataContext
from glyphforge.datasets.prepare_steps import upstream_file
from glyphforge.errors import StorageError
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import DownloadError, HashMismatchError, Resource
from glyphforge.storage.retries import RetryPolicy

from support.hashes import bytes_hash
from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.mounts import small_disk  # noqa: F401 (fixture)
from support.waits import TIMEOUT, wait_until

FAST = RetryPolicy(attempts=3, backoff=0.01, max_delay=0.05, connect_timeout=2.0, read_timeout=5.0)
DATA = random.Random(11).randbytes(100_000)
PATH = "files/f.bin"
MIRROR_ADVICE = r"use a mirror \(--mirror URL or \$GLYPHFORGE_MIRROR\)"
#: A number of seconds >= 0.6 as messages print it: a loaded machine may take longer than asked, never less.
AT_LEAST_0_6 = r"(0\.[6-9]|[1-9]\d*\.\d)"


def resource(server: LocalHTTPServer, data: bytes = DATA) -> Resource:
    return Resource("ds", "f.bin", server.url(PATH), bytes_hash(data, "sha256"))


def get(res: Resource, dest: Path, policy: RetryPolicy = FAST, **options) -> Path:
    return fetch(res, dest, progress=False, policy=policy, **options)


def logged(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno == level]


@pytest.fixture
def info_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="glyphforge")  # downloads, and lock waits (glyphforge.cache.locks)
    return caplog


# row 15: retries and lock waits are visible; the lock wait is bounded ------------------------------
def test_each_retry_is_logged_with_the_status_the_source_the_attempt_and_the_delay(http_server, tmp_path, info_log):
    http_server.add(PATH, DATA)
    http_server.fail(PATH, 503, times=2, retry_after="0")
    res = resource(http_server)
    assert get(res, tmp_path).read_bytes() == DATA
    assert logged(info_log) == [f"503 from {res.url}, retry 2/3 in 0 s", f"503 from {res.url}, retry 3/3 in 0 s"]


def test_a_stalled_server_is_logged_at_each_timeout(http_server, tmp_path, info_log):
    http_server.add(PATH, DATA)
    http_server.hold(PATH)
    policy = RetryPolicy(attempts=2, backoff=0.25, read_timeout=0.2)
    with pytest.raises(DownloadError):
        get(resource(http_server), tmp_path, policy)
    assert logged(info_log) == [f"ReadTimeout from {http_server.url(PATH)}, retry 2/2 in 0.25 s"]


HOLDER_SCRIPT = """
import sys
from glyphforge.pipelines.resource import Resource
from glyphforge.pipelines.download import fetch
fetch(Resource("ds", "f.bin", sys.argv[1], sys.argv[2]), sys.argv[3], progress=False)
"""


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_lock_held_by_a_stopped_process_times_out_naming_it(http_server, tmp_path, info_log, monkeypatch, how):
    http_server.add(PATH, DATA)
    gate = http_server.hold(PATH)
    res = resource(http_server)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_SCRIPT, res.url, res.hash, str(tmp_path)])
    try:
        wait_until(lambda: http_server.requests(PATH), "the holder's request", process=holder)
        assert http_server.requests(PATH) == 1  # the holder has the lock, and is downloading
        os.kill(holder.pid, signal.SIGSTOP)
        if how == "environment":
            monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", "0.6")
        started = time.monotonic()
        with pytest.raises(DownloadError) as caught:
            get(res, tmp_path, lock_timeout=0.6 if how == "argument" else None)
        assert 0.6 <= time.monotonic() - started < 30  # the stopped holder would keep the lock for ever
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        gate.set()
        holder.wait(timeout=TIMEOUT)
    assert holder.returncode == 0 and (tmp_path / "f.bin").read_bytes() == DATA
    host, since = socket.gethostname(), r"since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"  # ISO 8601, UTC
    who = rf"pid {holder.pid} on {re.escape(host)}, {since}"
    lock = re.escape(str(tmp_path / ".f.bin.lock"))
    part_size = r"( \(f\.bin\.part has \d+(\.\d)? [KM]?B\))?"  # what the holder has fetched, if anything
    assert re.fullmatch(
        rf"gave up waiting for another process fetching ds/f\.bin after {AT_LEAST_0_6} s: {lock} is held by {who}"
        rf"{part_size}\. If that process is still fetching ds/f\.bin, wait for it, or wait longer with lock_timeout= "
        r"or \$GLYPHFORGE_LOCK_TIMEOUT \(seconds; inf waits for ever\); if it is stuck \(stopped with Ctrl-Z or "
        rf"SIGSTOP, or hung\), end it \(`kill {holder.pid}` on {re.escape(host)}\): the lock is freed when its "
        rf"holder exits; if it is gone, remove {lock} and {lock}\.holder\. Then run again\.", str(caught.value))
    assert caught.value.target == tmp_path / "f.bin"
    assert re.fullmatch(rf"waiting for another process fetching ds/f\.bin \({who}\): 0 s so far"
                        rf"(, f\.bin\.part has \d+(\.\d)? [KM]?B)?; giving up after 0\.6 s", logged(info_log)[0])
    assert not (tmp_path / ".f.bin.lock.holder").exists()  # the holder forgot itself on release


# row 16: a dripping server fails in bounded time ----------------------------------------------------
def test_a_dripping_server_fails_below_the_minimum_rate(http_server, tmp_path, info_log):
    http_server.add(PATH, DATA)
    http_server.drip(PATH, 1, every=0.3)
    res = resource(http_server)
    policy = RetryPolicy(min_rate=100, rate_window=1.0, report_every=0.5)
    started = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        get(res, tmp_path, policy)
    assert time.monotonic() - started < 20  # the whole file would take hours at this rate
    assert re.search(
        rf"\n  - {re.escape(res.url)}: too slow: \d+ B in the last [1-9](\.\d+)? s \(\d+ B/s\), below the minimum of "
        rf"100 B/s \(RetryPolicy\.min_rate\); the partial file is kept: run again to resume, {MIRROR_ADVICE}, or "
        r"accept slower transfers with a lower min_rate\n", str(caught.value))
    assert re.fullmatch(rf"ds/f\.bin: \d+ B of 100\.0 KB after [\d.]+ s \(\d+ B/s\) from {re.escape(res.url)}",
                        logged(info_log)[0])
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith(".")) == ["f.bin.part"]


def test_a_download_past_its_deadline_fails(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.drip(PATH, 2000, every=0.05)  # 40 KB/s: fast enough, but 100 KB take 2.5 s
    res = resource(http_server)
    started = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        get(res, tmp_path, RetryPolicy(deadline=0.6))
    assert time.monotonic() - started < 20
    assert re.search(
        rf"  - {re.escape(res.url)}: not complete within the deadline of 0\.6 s \(RetryPolicy\.deadline\): "
        rf"[\d.]+ KB of 100\.0 KB after {AT_LEAST_0_6}\d? s \([\d.]+ KB/s\); the partial file is kept: run again to "
        rf"resume, {MIRROR_ADVICE}, or give a larger deadline\n", str(caught.value))


def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.fail(PATH, 503, times=None, retry_after="30")
    res = resource(http_server)
    started = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        get(res, tmp_path, RetryPolicy(deadline=5, max_delay=60))
    assert time.monotonic() - started < 20 and http_server.requests(PATH) == 1  # not the 30 s asked for
    assert re.search(
        rf"  - {re.escape(res.url)}: not complete within the deadline of 5 s \(RetryPolicy\.deadline\): 0 B of an "
        r"unknown size after [\d.]+ s \(0 B/s\); last: 503 Service Unavailable, with a retry due in 30 s; "
        rf"{MIRROR_ADVICE}, or give a larger deadline\n", str(caught.value))


# row 17: a resume that does not verify is fetched again from byte 0 in the same run -------------------
def test_a_corrupt_tail_after_a_resume_is_fetched_again_from_byte_0(http_server, tmp_path, caplog):
    http_server.add(PATH, DATA)
    http_server.drop_after(PATH, 30_000)
    http_server.corrupt(PATH, ranges_only=True)  # the file changed on the server between the drop and the resume
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [(None, 200), ("bytes=30000-", 206), (None, 200)]
    assert http_server.requests(PATH) == 3
    [warning] = logged(caplog, logging.WARNING)
    assert warning.startswith(f"{http_server.url(PATH)}: the resumed file did not verify (wrong content: ")
    assert warning.endswith("; downloading it again from byte 0")


def test_a_resume_is_retried_from_byte_0_only_once(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.drop_after(PATH, 30_000)
    http_server.corrupt(PATH)
    with pytest.raises(HashMismatchError):
        get(resource(http_server), tmp_path)
    assert [(r.range, r.status) for r in http_server.log] == [(None, 200), ("bytes=30000-", 206), (None, 200)]
    assert not any(tmp_path.glob("f.bin*"))


# row 18: the advice names the option both ways ---------------------------------------------------------
def test_a_given_file_with_the_wrong_hash_names_verify_false_and_no_verify(tmp_path):
    given = tmp_path / "f.bin"
    given.write_bytes(b"a custom file")
    res = Resource("ds", "f.bin", "https://example.org/f.bin", bytes_hash(DATA, "sha256"))
    with pytest.raises(HashMismatchError, match=r"pass verify=False \(on the command line: --no-verify\) to "
                                                r"convert a custom file\.$"):
        upstream_file(res, DataContext.resolve(data_dir=tmp_path, progress=False), given=given)


# row 10: a full disk names the .part, the free space and what to do, and keeps the .part -------------
def test_a_full_disk_raises_a_storage_error_and_keeps_the_part_for_a_resume(http_server, small_disk):
    data = random.Random(3).randbytes(2_000_000)
    http_server.add(PATH, data)
    res = resource(http_server, data)
    part = small_disk / "f.bin.part"
    with pytest.raises(StorageError) as caught:
        get(res, small_disk)
    assert re.fullmatch(
        rf"cannot write {re.escape(str(part))}: the disk is full \(0\.\d MB free there\) \(No space left on device\)\. "
        r"Free space there, or give a data dir on a larger disk \(--data-dir or \$GLYPHFORGE_DATA_DIR\), and run "
        r"again: finished work is kept and resumed", str(caught.value))
    assert caught.value.filename == str(part)
    kept = part.stat().st_size
    assert 0 < kept < len(data) and part.read_bytes() == data[:kept] and not (small_disk / "f.bin").exists()
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)  # space freed
    assert get(res, small_disk).read_bytes() == data
    assert [(r.range, r.status) for r in http_server.log] == [(None, 200), (f"bytes={kept}-", 206)]
