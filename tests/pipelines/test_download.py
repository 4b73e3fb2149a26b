"""The downloader against a real HTTP server on 127.0.0.1 with injected faults."""
from __future__ import annotations

import inspect
import logging
import pickle
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import DownloadError, HashMismatchError, Resource
from glyphforge.storage.retries import RetryPolicy

from support.hashes import bytes_hash
from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.waits import TIMEOUT, wait_until

FAST = RetryPolicy(attempts=3, backoff=0.01, max_delay=0.05, connect_timeout=2.0, read_timeout=5.0)
DATA = random.Random(7).randbytes(100_000)
PATH = "files/f.bin"


def resource(server: LocalHTTPServer, *, path: str = PATH, data: bytes = DATA, size: int | None = None,
             algorithm: str = "sha256") -> Resource:
    return Resource("ds", "f.bin", server.url(path), bytes_hash(data, algorithm), size)


def get(res: Resource, dest: Path, **options) -> Path:
    return fetch(res, dest, progress=False, policy=options.pop("policy", FAST), **options)


def files_in(directory: Path) -> list[str]:
    """Visible files left in ``directory`` (the hidden per-file lock is allowed)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def raised(res: Resource, dest: Path, error_type: type[DownloadError] = DownloadError, **options) -> DownloadError:
    with pytest.raises(error_type) as caught:
        get(res, dest, **options)
    assert type(caught.value) is error_type
    return caught.value


# the normal path -----------------------------------------------------------------------------
def test_downloads_verifies_and_renames_into_place(http_server, tmp_path):
    http_server.add(PATH, DATA)
    path = get(resource(http_server, size=len(DATA)), tmp_path / "raw")
    assert path == tmp_path / "raw" / "f.bin"
    assert path.read_bytes() == DATA
    assert files_in(tmp_path / "raw") == ["f.bin"]
    assert http_server.requests(PATH) == 1 and http_server.bytes_served(PATH) == len(DATA)


@pytest.mark.parametrize("algorithm", ["md5", "git-blob-sha1"])
def test_md5_and_git_blob_hashes_are_checked_too(http_server, tmp_path, algorithm):
    http_server.add(PATH, DATA)
    assert get(resource(http_server, algorithm=algorithm), tmp_path).read_bytes() == DATA


def test_preplaced_correct_file_needs_no_request(http_server, tmp_path):
    http_server.add(PATH, DATA)
    (tmp_path / "f.bin").write_bytes(DATA)
    assert get(resource(http_server, size=len(DATA)), tmp_path) == tmp_path / "f.bin"
    assert get(resource(http_server), tmp_path, offline=True) == tmp_path / "f.bin"
    assert http_server.requests() == 0


def test_progress_bar_shows_bytes_on_stderr(http_server, tmp_path, capsys):
    http_server.add(PATH, DATA)
    fetch(resource(http_server), tmp_path / "a", policy=FAST, progress=True)
    shown = capsys.readouterr().err
    assert "ds/f.bin: 100%" in shown and "97.7k/97.7k" in shown
    fetch(resource(http_server), tmp_path / "b", policy=FAST, progress=False)
    assert capsys.readouterr().err == ""


# resuming ------------------------------------------------------------------------------------
def test_dropped_connection_resumes_and_downloads_only_the_remainder(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.drop_after(PATH, 30_000)
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [(None, 200), ("bytes=30000-", 206)]
    assert http_server.bytes_served(PATH) == len(DATA)


def test_part_left_by_an_earlier_run_is_resumed(http_server, tmp_path):
    http_server.add(PATH, DATA)
    (tmp_path / "f.bin.part").write_bytes(DATA[:40_000])
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [("bytes=40000-", 206)]
    assert http_server.bytes_served(PATH) == len(DATA) - 40_000
    assert files_in(tmp_path) == ["f.bin"]


def test_complete_part_is_verified_without_downloading_again(http_server, tmp_path):
    http_server.add(PATH, DATA)
    (tmp_path / "f.bin.part").write_bytes(DATA)
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [(f"bytes={len(DATA)}-", 416)]
    assert http_server.bytes_served(PATH) == 0


def test_server_ignoring_range_restarts_cleanly(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.ignore_range(PATH)
    (tmp_path / "f.bin.part").write_bytes(DATA[:40_000])
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [("bytes=40000-", 200)]


def test_stale_part_that_does_not_verify_is_downloaded_again_from_scratch(http_server, tmp_path):
    http_server.add(PATH, DATA)
    (tmp_path / "f.bin.part").write_bytes(b"\0" * 40_000)
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [(r.range, r.status) for r in http_server.log] == [("bytes=40000-", 206), (None, 200)]


def test_dropping_server_that_ignores_range_is_given_up_on(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.ignore_range(PATH)
    http_server.drop_after(PATH, 30_000, times=100)
    error = raised(resource(http_server), tmp_path)
    assert http_server.requests(PATH) == FAST.attempts
    assert "gave up after 3 failed attempts in a row; last: ProtocolError" in str(error)
    assert files_in(tmp_path) == ["f.bin.part"]  # kept for a later resume, never at the final path


# retries -------------------------------------------------------------------------------------
def test_retries_recover_from_503(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.fail(PATH, 503, times=2, retry_after="0")
    assert get(resource(http_server), tmp_path).read_bytes() == DATA
    assert [r.status for r in http_server.log] == [503, 503, 200]


def test_retry_after_is_honoured(http_server, tmp_path, caplog):
    http_server.add(PATH, DATA)
    http_server.fail(PATH, 429, times=1, retry_after="1")
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="glyphforge"):
        get(resource(http_server), tmp_path, policy=RetryPolicy(backoff=0.01, max_delay=5.0))
    assert time.monotonic() - started >= 1.0  # (no upper bound: a loaded machine may take longer)
    assert [record.getMessage() for record in caplog.records] == [f"429 from {http_server.url(PATH)}, retry 2/5 in 1 s"]
    assert [r.status for r in http_server.log] == [429, 200]


def test_backoff_doubles_and_is_capped():
    policy = RetryPolicy(backoff=0.5, max_delay=3.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(1, 120.0) == 3.0 and policy.delay(4, 0.0) == 0.0


def test_downloads_and_store_reads_retry_under_one_policy():
    from glyphforge.storage.backend import Backend
    from glyphforge.storage.retries import DEFAULT_POLICY

    assert inspect.signature(fetch).parameters["policy"].default is DEFAULT_POLICY
    for read in (Backend.read, Backend.size, Backend.names, Backend.call):
        assert inspect.signature(read).parameters["policy"].default is DEFAULT_POLICY, read
    delays = [DEFAULT_POLICY.delay(2, None) for _ in range(200)]  # many readers failing together spread out
    assert 0.8 <= min(delays) < max(delays) <= 1.2 and len(set(delays)) > 100


def test_retries_are_bounded_and_the_error_says_what_to_do(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.fail(PATH, 503, times=None, retry_after="0")
    res = resource(http_server)
    error = raised(res, tmp_path)
    assert http_server.requests(PATH) == 3
    assert str(error) == (
        f"could not get ds/f.bin ({res.hash}) from {res.url}.\n"
        "Mirrors tried: none (set GLYPHFORGE_MIRROR or use --mirror)\n"
        f"  - {res.url}: gave up after 3 failed attempts in a row; last: 503 Service Unavailable\n"
        f"What to do: check the network (and the mirrors) and run again, or download {res.url} yourself "
        f"and place the file at:\n  {tmp_path / 'f.bin'}\n"
        "A file placed there is used without network access when its hash matches (or, with verify=False or "
        "--no-verify, as your own copy)."
    )
    assert error.target == tmp_path / "f.bin" and error.resource == res


def test_404_is_not_retried(http_server, tmp_path):
    error = raised(resource(http_server), tmp_path)
    assert http_server.requests(PATH) == 1
    assert f"  - {http_server.url(PATH)}: 404 Not Found\n" in str(error)
    assert files_in(tmp_path) == []


def test_connection_refused_is_retried_then_reported(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    res = Resource("ds", "f.bin", f"http://127.0.0.1:{port}/f.bin", bytes_hash(DATA, "sha256"))
    error = raised(res, tmp_path)
    assert f"  - {res.url}: gave up after 3 failed attempts in a row; last: ConnectionError" in str(error)


def test_read_timeout_is_retried_then_reported(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.hold(PATH)
    policy = RetryPolicy(attempts=2, backoff=0.01, connect_timeout=2.0, read_timeout=0.2)
    started = time.monotonic()
    error = raised(resource(http_server), tmp_path, policy=policy)
    assert time.monotonic() - started < 20  # far below the 30 s the server holds the answer
    assert http_server.requests(PATH) == 2
    port = http_server.base_url.rsplit(":", 1)[1]
    assert (
        "gave up after 2 failed attempts in a row; last: ReadTimeout: "
        f"HTTPConnectionPool(host='127.0.0.1', port={port}): Read timed out. (read timeout=0.2)\n"
    ) in str(error)


# wrong content ---------------------------------------------------------------------------------
def test_wrong_bytes_raise_hash_mismatch_and_leave_no_file(http_server, tmp_path):
    http_server.add(PATH, DATA)
    http_server.corrupt(PATH)
    res = resource(http_server, size=len(DATA))
    error = raised(res, tmp_path, HashMismatchError)
    corrupted = bytearray(DATA)
    corrupted[len(DATA) // 2] ^= 0xFF
    assert (error.expected, error.actual) == (res.hash, bytes_hash(bytes(corrupted), "sha256"))
    assert (error.expected_size, error.actual_size) == (len(DATA), len(DATA))
    assert (error.url, error.final_url) == (res.url, res.url)
    assert (
        f"  - {res.url}: wrong content: expected {res.hash}, got {error.actual}; expected size 100000 bytes, "
        "got 100000 bytes; the bad download was deleted\n"
    ) in str(error)
    assert f"place the file at:\n  {tmp_path / 'f.bin'}\n" in str(error)
    assert files_in(tmp_path) == []
    assert http_server.requests(PATH) == 1


def test_hash_error_names_the_final_url_after_redirects(http_server, tmp_path):
    http_server.add("new/f.bin", DATA[:-1])
    http_server.redirect(PATH, "new/f.bin")
    res = resource(http_server)
    error = raised(res, tmp_path, HashMismatchError)
    assert (error.url, error.final_url, error.actual_size, error.expected_size) == (
        res.url, http_server.url("new/f.bin"), len(DATA) - 1, None)
    assert (f"expected size not pinned, got 99999 bytes; final URL after redirects: "
            f"{http_server.url('new/f.bin')}; the bad download was deleted") in str(error)


def test_redirect_to_the_right_file_is_followed(http_server, tmp_path):
    http_server.add("new/f.bin", DATA)
    http_server.redirect(PATH, "new/f.bin", status=301)
    assert get(resource(http_server), tmp_path).read_bytes() == DATA


def test_html_page_is_refused_at_once(http_server, tmp_path):
    """Like NIST's old EMNIST address, which now redirects to a web page."""
    http_server.add("page.html", b"<!DOCTYPE html><html><body>EMNIST has moved</body></html>")
    http_server.content_type("page.html", "text/html; charset=utf-8")
    http_server.redirect(PATH, "page.html")
    error = raised(resource(http_server), tmp_path)
    assert (
        f"  - {http_server.url(PATH)}: answered with a web page (Content-Type text/html, final URL "
        f"{http_server.url('page.html')}), not the file: the address has probably moved\n"
    ) in str(error)
    assert http_server.requests("page.html") == 1
    assert files_in(tmp_path) == []


def test_announced_size_that_differs_from_the_pinned_size_is_refused(http_server, tmp_path):
    http_server.add(PATH, DATA + b"extra")
    error = raised(resource(http_server, size=len(DATA)), tmp_path)
    assert f"  - {http_server.url(PATH)}: announces 100005 bytes, expected 100000\n" in str(error)
    assert http_server.requests(PATH) == 1 and files_in(tmp_path) == []


# mirrors ---------------------------------------------------------------------------------------
def test_http_mirrors_are_tried_in_order_before_the_origin(http_server, tmp_path):
    http_server.add("m2/ds/f.bin", DATA)
    res = resource(http_server)
    mirrors = [http_server.url("m1"), http_server.url("m2") + "/"]
    assert get(res, tmp_path, mirrors=mirrors).read_bytes() == DATA
    assert [(r.path, r.status) for r in http_server.log] == [("m1/ds/f.bin", 404), ("m2/ds/f.bin", 200)]


def test_file_url_mirror_is_used_without_network(http_server, tmp_path):
    (tmp_path / "mirror" / "ds").mkdir(parents=True)
    (tmp_path / "mirror" / "ds" / "f.bin").write_bytes(DATA)
    path = get(resource(http_server), tmp_path / "raw", mirrors=[(tmp_path / "mirror").as_uri()])
    assert path.read_bytes() == DATA and http_server.requests() == 0


def test_directory_mirror_from_the_environment(http_server, tmp_path, monkeypatch):
    (tmp_path / "mirror" / "ds").mkdir(parents=True)
    (tmp_path / "mirror" / "ds" / "f.bin").write_bytes(DATA)
    monkeypatch.setenv("GLYPHFORGE_MIRROR", f"{tmp_path / 'nothing-here'} {tmp_path / 'mirror'}")
    assert get(resource(http_server), tmp_path / "raw").read_bytes() == DATA
    assert http_server.requests() == 0


def test_bad_mirror_copy_falls_back_to_the_origin(http_server, tmp_path):
    http_server.add(PATH, DATA)
    (tmp_path / "mirror" / "ds").mkdir(parents=True)
    (tmp_path / "mirror" / "ds" / "f.bin").write_bytes(DATA[::-1])
    assert get(resource(http_server), tmp_path / "raw", mirrors=[str(tmp_path / "mirror")]).read_bytes() == DATA
    assert http_server.requests(PATH) == 1


def test_every_mirror_and_the_origin_are_named_when_all_fail(http_server, tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_MIRROR", http_server.url("env-mirror"))
    res = resource(http_server)
    error = raised(res, tmp_path / "raw", mirrors=[str(tmp_path / "dir-mirror")])
    local = tmp_path / "dir-mirror" / "ds" / "f.bin"
    assert error.mirrors == (str(local), http_server.url("env-mirror/ds/f.bin"))
    assert (
        f"Mirrors tried: {local}, {http_server.url('env-mirror/ds/f.bin')}\n"
        f"  - {local}: no such file\n"
        f"  - {http_server.url('env-mirror/ds/f.bin')}: 404 Not Found\n"
        f"  - {res.url}: 404 Not Found\n"
    ) in str(error)


def test_http_mirror_serving_a_directory_tree(http_server, tmp_path):
    (tmp_path / "tree" / "ds").mkdir(parents=True)
    (tmp_path / "tree" / "ds" / "f.bin").write_bytes(DATA)
    with LocalHTTPServer(directory=tmp_path / "tree") as mirror:
        assert get(resource(http_server), tmp_path / "raw", mirrors=[mirror.base_url]).read_bytes() == DATA
        assert mirror.bytes_served("ds/f.bin") == len(DATA)
    assert http_server.requests() == 0


def test_file_url_origin_is_local_and_allowed_offline(tmp_path):
    (tmp_path / "upstream").mkdir()
    (tmp_path / "upstream" / "f.bin").write_bytes(DATA)
    res = Resource("ds", "f.bin", (tmp_path / "upstream" / "f.bin").as_uri(), bytes_hash(DATA, "sha256"))
    assert get(res, tmp_path / "raw", offline=True).read_bytes() == DATA


def test_unsupported_mirror_scheme_is_refused(http_server, tmp_path):
    with pytest.raises(ValueError, match=r"^mirror 'nosuch://example.org/data' is not supported: nosuch://example.org/"
                                         r"data: glyphforge does not support nosuch:// URLs; it takes "
                                         r"s3://BUCKET/prefix, gs://BUCKET/prefix, https://HOST/path"):
        get(resource(http_server), tmp_path, mirrors=["nosuch://example.org/data"])
    with pytest.raises(ValueError, match=r"^mirror 'file://host/data' is not supported: a file:// URL names a path on "
                                         r"this machine \(file:///path, no host\)"):
        get(resource(http_server), tmp_path, mirrors=["file://host/data"])


# offline ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_offline_fails_fast_with_the_manual_placement_message(http_server, tmp_path, monkeypatch, how):
    http_server.add(PATH, DATA)
    http_server.add("m/ds/f.bin", DATA)
    if how == "environment":
        monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    res = resource(http_server)
    started = time.monotonic()
    error = raised(res, tmp_path, mirrors=[http_server.url("m")], offline=True if how == "argument" else None)
    assert time.monotonic() - started < 20  # no retries or backoff; no request at all, below
    assert http_server.requests() == 0
    assert str(error) == (
        f"could not get ds/f.bin ({res.hash}) from {res.url}.\n"
        "Offline mode (GLYPHFORGE_OFFLINE=1 or offline=True) forbids network access: only the file in place "
        "and local mirrors (directories, file://) were consulted; HTTP and object storage (s3://, gs://) mirrors "
        "are the network.\n"
        "Mirrors tried: none (offline, only directory and file:// mirrors are tried)\n"
        "  (no local source to try)\n"
        "What to do: unset GLYPHFORGE_OFFLINE and run again on a machine with network access, or download "
        f"{res.url} yourself and place the file at:\n  {tmp_path / 'f.bin'}\n"
        "A file placed there is used without network access when its hash matches (or, with verify=False or "
        "--no-verify, as your own copy)."
    )


def test_offline_still_uses_a_directory_mirror(http_server, tmp_path):
    (tmp_path / "mirror" / "ds").mkdir(parents=True)
    (tmp_path / "mirror" / "ds" / "f.bin").write_bytes(DATA)
    path = get(resource(http_server), tmp_path / "raw", mirrors=[tmp_path / "mirror"], offline=True)
    assert path.read_bytes() == DATA and http_server.requests() == 0


def test_mirrors_given_as_one_string_are_split_on_spaces(http_server, tmp_path):
    (tmp_path / "mirror" / "ds").mkdir(parents=True)
    (tmp_path / "mirror" / "ds" / "f.bin").write_bytes(DATA)
    mirrors = f"{http_server.url('m')} {tmp_path / 'mirror'}"
    assert get(resource(http_server), tmp_path / "raw", mirrors=mirrors).read_bytes() == DATA
    assert [(r.path, r.status) for r in http_server.log] == [("m/ds/f.bin", 404)]


@pytest.mark.parametrize("offline", [True, False], ids=["offline", "online"])
def test_a_wrong_preplaced_file_is_kept_and_reported(http_server, tmp_path, offline):
    """Issue #22 row 4: a file in place that glyphforge did not write is the user's: never deleted or overwritten."""
    http_server.add(PATH, DATA)
    placed = tmp_path / "f.bin"
    placed.write_bytes(b"truncated")
    res = resource(http_server, size=len(DATA))
    error = raised(res, tmp_path, HashMismatchError, offline=offline)
    assert (error.url, error.actual, error.actual_size, error.target) == (
        str(placed), bytes_hash(b"truncated", "sha256"), 9, placed)
    assert str(error).startswith(
        f"{placed} is not {res.url}: its hash is {error.actual} (9 bytes), expected {res.hash} (100,000 bytes). "
        "glyphforge leaves it as it is: it never deletes or overwrites a file it did not download itself")
    assert str(error).endswith("pass verify=False (on the command line: --no-verify); to have glyphforge download "
                               "upstream's file instead, move it away (e.g. to f.bin.mine) and run again.")
    assert placed.read_bytes() == b"truncated" and files_in(tmp_path) == ["f.bin"]
    assert http_server.requests() == 0  # refused before any source: nothing could replace it anyway
    placed.rename(tmp_path / "f.bin.mine")
    assert get(res, tmp_path).read_bytes() == DATA  # moved away: upstream's is downloaded
    assert (tmp_path / "f.bin.mine").read_bytes() == b"truncated"


# resources and errors ----------------------------------------------------------------------------
def test_resource_normalises_its_hash_and_validates_fields():
    res = Resource("ds", "f.bin", "https://example.org/f.bin", "md5:900150983CD24FB0D6963F7D28E17F72", 3)
    assert res.hash == "md5:900150983cd24fb0d6963f7d28e17f72"
    with pytest.raises(ValueError, match=r"Resource filename 'a/b.bin' must be a plain name"):
        Resource("ds", "a/b.bin", "https://example.org/f.bin", res.hash)
    with pytest.raises(ValueError, match=r"Resource ds/f.bin: hash 'md5:abc' is malformed"):
        Resource("ds", "f.bin", "https://example.org/f.bin", "md5:abc")
    with pytest.raises(ValueError, match=r"Resource ds/f.bin: url 'ftp://example.org/f.bin' must be"):
        Resource("ds", "f.bin", "ftp://example.org/f.bin", res.hash)


def test_errors_survive_pickling_for_worker_processes(http_server, tmp_path):
    http_server.add(PATH, DATA[:-1])
    error = raised(resource(http_server), tmp_path, HashMismatchError)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is HashMismatchError and str(copy) == str(error)
    assert (copy.actual, copy.target, copy.attempts) == (error.actual, error.target, error.attempts)


# concurrency -----------------------------------------------------------------------------------
FETCH_SCRIPT = """
import logging, sys
from glyphforge.pipelines.resource import Resource
from glyphforge.pipelines.download import fetch
logging.basicConfig(level=logging.INFO, format="%(message)s")  # on stderr: a lock wait says so
resource = Resource("ds", "f.bin", sys.argv[1], sys.argv[2])
print("start", flush=True)
print(fetch(resource, sys.argv[3], progress=False), flush=True)
"""


def test_two_processes_download_the_same_file_once(http_server, tmp_path):
    http_server.add(PATH, DATA)
    gate = http_server.hold(PATH)
    res = resource(http_server)
    command = [sys.executable, "-c", FETCH_SCRIPT, res.url, res.hash, str(tmp_path / "raw")]
    logs = [tmp_path / f"worker-{index}.log" for index in range(2)]
    workers = []
    for log in logs:
        with open(log, "w") as stderr:
            workers.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True))
    try:
        assert [worker.stdout.readline() for worker in workers] == ["start\n", "start\n"]
        # one worker is downloading (its request is held), the other waits for the lock and says so
        wait_until(lambda: http_server.requests(PATH) == 1 and any(
            "waiting for another process fetching ds/f.bin" in log.read_text() for log in logs),
            "one worker to download and the other to wait for the lock")
        assert http_server.requests(PATH) == 1
        gate.set()
        outputs = [worker.communicate(timeout=TIMEOUT)[0] for worker in workers]
    finally:
        gate.set()
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert [worker.returncode for worker in workers] == [0, 0]
    assert outputs == [f"{tmp_path / 'raw' / 'f.bin'}\n"] * 2
    assert http_server.requests(PATH) == 1
    assert (tmp_path / "raw" / "f.bin").read_bytes() == DATA


def test_a_second_origin_is_tried_after_the_first_fails(http_server, tmp_path):
    """Resource.more_urls: MNIST's S3 copy first, LeCun's original address second."""
    http_server.add("second/f.bin", DATA)
    http_server.fail(PATH, 404, times=None)
    first = resource(http_server)
    both = Resource("ds", "f.bin", first.url, first.hash, more_urls=(http_server.url("second/f.bin"),))
    assert get(both, tmp_path).read_bytes() == DATA
    assert [(r.path, r.status) for r in http_server.log] == [(PATH, 404), ("second/f.bin", 200)]
    with pytest.raises(ValueError, match=r"url 'ftp://x/f\.bin' must be http\(s\):// or file://"):
        Resource("ds", "f.bin", first.url, first.hash, more_urls=("ftp://x/f.bin",))
