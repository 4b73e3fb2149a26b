"""No secret in a URL is ever printed (issue 42, row 5): one rule, `glyphforge.urls.redacted`, everywhere.

A mirror over HTTP with ``user:password@`` (basic auth to a private mirror) is taken and used, and
a data dir or mirror URL with a token in its query string is refused (files are found below a
URL, where a query cannot go). Either way, whatever a command prints with ``-v`` (its output, its
log lines, the retries a failing server causes, "Mirrors tried:", the traceback) never holds the
secret. A real HTTP server on 127.0.0.1 serves the mirror and the origins, with faults.
"""
from __future__ import annotations

import base64
import json

import pytest

from glyphforge.cache import raw

from support.cli import run_here
from support.http_server import http_server  # noqa: F401 (fixture)
from support.served_dataset import served_dataset

SECRET = "s3cr3t-T0KEN-42"
#: The served dataset's files: name -> bytes.
SERVED = {"a.bin": b"first file " * 100, "b.bin": b"second file " * 200}


@pytest.fixture
def served(http_server):
    """A dataset ``served`` whose files' origins are on the local server: ``a.bin`` there, ``b.bin`` missing; its
    mirror (``mirror/``) serves ``a.bin`` after two 503s (retries print) and redirects ``b.bin`` to a signed URL
    serving the wrong bytes (its final URL prints)."""
    http_server.add("origin/a.bin", SERVED["a.bin"])
    http_server.add("mirror/served/a.bin", SERVED["a.bin"])
    http_server.fail("mirror/served/a.bin", 503, times=2, retry_after="0")
    http_server.add("mirror/signed", bytes(len(SERVED["b.bin"])))  # its size, not its bytes
    http_server.redirect("mirror/served/b.bin", f"mirror/signed?X-Amz-Signature={SECRET}")
    with served_dataset(http_server, SERVED, "two files on a local server (a test dataset)"):
        yield http_server


def mirror_url(server) -> str:
    """The mirror's base URL, with a user and password (HTTP basic auth)."""
    return f"http://alice:{SECRET}@127.0.0.1:{server.base_url.rsplit(':', 1)[1]}/mirror"


def printed(done) -> str:
    """Everything the command printed (its output, its log lines and its error, with -v its traceback)."""
    return done.stdout + done.stderr


#: How a mirror is given: ``(arguments, environment)`` of a command, for the mirror URL ``url``.
MIRROR_PLACES = {
    "--mirror": lambda url: ([f"--mirror={url}"], {}),
    "$GLYPHFORGE_MIRROR": lambda url: ([], {"GLYPHFORGE_MIRROR": url}),
}
#: The commands that fetch (``--to`` is filled in with the test's folder).
FETCHING = {
    "prepare-data": ["prepare-data", "served"],
    "prepare-data --download-only": ["prepare-data", "served", "--download-only", "--to"],
}


@pytest.mark.parametrize("place", MIRROR_PLACES)
@pytest.mark.parametrize("command", FETCHING)
def test_a_mirror_password_is_used_and_never_printed(served, command, place, tmp_path):
    """The password was printed in full in the retry lines, "Mirrors tried:" and -v's output."""
    argv, env = MIRROR_PLACES[place](mirror_url(served))
    data_dir, to = tmp_path / "data", tmp_path / "to"
    done = run_here(*FETCHING[command][:1], *FETCHING[command][1:], *([to] if command.endswith("only") else []),
                    *argv, "--data-dir", data_dir, "-v", env=env)
    assert done.returncode == 1, printed(done)
    assert SECRET not in printed(done)
    shown = served.base_url.replace("http://", "http://***@") + "/mirror"
    assert f"503 from {shown}/served/a.bin, retry 2/5 in 0 s" in done.stderr  # the retries printed, redacted
    assert f"{shown}/served/b.bin: wrong content" in done.stderr
    assert "final URL after redirects: " + served.url("mirror/signed?***") in done.stderr
    assert "Traceback" in done.stderr
    if command == "prepare-data":
        assert f"Mirrors tried: {shown}" in done.stderr
    # the mirror was used, with the password as HTTP basic auth; the record of the download holds no secret
    auth = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert {record.authorization for record in served.log if record.path.startswith("mirror/served/")} == {auth}
    fetched = (to / "served" / "a.bin") if command.endswith("only") else (data_dir / "raw" / "served" / "a.bin")
    assert fetched.read_bytes() == SERVED["a.bin"]
    assert served.requests("origin/a.bin") == 0
    record = json.loads(raw.record_path(fetched).read_text())
    assert record["source"] == f"{shown}/served/a.bin"


@pytest.mark.parametrize("place", MIRROR_PLACES)
def test_info_shows_a_mirror_without_its_password(served, place, tmp_path):
    argv, env = MIRROR_PLACES[place](mirror_url(served))
    done = run_here("glyphforge", "info", *argv, "--data-dir", tmp_path, "-v", env=env)
    assert done.returncode == 0, printed(done)
    assert SECRET not in printed(done)
    assert f"mirrors:    {served.base_url.replace('http://', 'http://***@')}/mirror" in done.stdout


#: Every place a URL is given where a token in it is refused: ``(command line, environment)`` with
#: ``{}`` for the secret. (A data dir URL with ``user:password@`` was refused without showing them already:
#: tests/storage/test_storage_location.py.)
REFUSED = {
    "--data-dir https:// ?token=": (["glyphforge", "cache", "ls", "--data-dir", "https://127.0.0.1:9/data?token={}"],
                                    {}),
    "$GLYPHFORGE_DATA_DIR https:// ?token=": (["glyphforge", "cache", "ls"],
                                             {"GLYPHFORGE_DATA_DIR": "https://127.0.0.1:9/data?token={}"}),
    "--data-dir s3:// ?secret=": (["glyphforge", "info", "--data-dir", "s3://bucket/data?secret={}"], {}),
    "--mirror https:// ?token=": (["prepare-data", "served", "--mirror", "https://127.0.0.1:9/m?token={}"], {}),
    "$GLYPHFORGE_MIRROR https:// ?token=": (["prepare-data", "served"],
                                           {"GLYPHFORGE_MIRROR": "https://127.0.0.1:9/m?token={}"}),
    "--mirror s3:// user:password@": (["glyphforge", "info", "--mirror", "s3://a:{}@bucket/m"], {}),
    "--mirror ftp:// user:password@": (["prepare-data", "served", "--mirror", "ftp://a:{}@host/m"], {}),
    "publish target s3:// ?secret=": (["glyphforge", "publish", "served", "s3://bucket/data?secret={}"], {}),
}


@pytest.mark.parametrize("place", REFUSED)
def test_a_secret_bearing_url_is_refused_before_any_work_without_showing_it(served, place, tmp_path):
    argv, env = REFUSED[place]
    argv = [part.format(SECRET) for part in argv]
    env = {name: value.format(SECRET) for name, value in env.items()}
    done = run_here(*argv, "-v", env={"GLYPHFORGE_DATA_DIR": str(tmp_path / "data"), **env}, cwd=tmp_path)
    assert done.returncode == 2, printed(done)
    assert SECRET not in printed(done)
    assert "***" in done.stderr or "user and password" in done.stderr  # the URL is named, its secret is not
    assert served.requests() == 0 and not (tmp_path / "data").exists()

