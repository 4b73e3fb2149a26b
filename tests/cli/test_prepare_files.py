"""Air-gapped clusters in two commands (issue 34, row 1): ``prepare-data NAMES --list`` / ``--download-only --to DIR``.

``--list`` (and ``--list --json``) is checked against the registry; ``--download-only`` fetches
from a real HTTP server on 127.0.0.1 into a mirror folder, from which ``--mirror DIR --offline``
prepares with no network, and the result loads. Real Omniglot small sets and backgrounds
(``../shared/data``) are served where a mirror hit is all a test needs; where sources must fail,
a dataset registered here has its origins on the server too, so no test reaches the internet.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import glyphforge as gf
from glyphforge.cache import CacheStore
from glyphforge.datasets import registry

from support.cli import BIN, run_here
from support.hashes import bytes_hash
from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.mounts import tmpfs
from support.served_dataset import served_dataset
from support.waits import wait_until

SMALL = ["images_background_small1.zip"]
PICTURES = ["water.jpg", "ice.jpg", "blue_x.png"]
#: The served dataset's files: name -> bytes.
SERVED = {"a.bin": b"first file " * 100, "b.bin": b"second file " * 200, "c.bin": b"third file " * 300}


def listed(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_here("prepare-data", *argv, "--list", env=env)


def expected_files(wanted: dict[str, dict], data_dir: Path) -> list[dict]:
    """What --list --json should say of each file, from the registry."""
    files, seen = [], set()
    for name, options in wanted.items():
        for resource in registry.needed(name, **options):
            if (resource.dataset, resource.filename) in seen:
                continue
            seen.add((resource.dataset, resource.filename))
            files.append({"dataset": resource.dataset, "file": resource.filename, "size": resource.size,
                          "hash": resource.hash, "urls": [resource.url, *resource.more_urls],
                          "place": str(data_dir / "raw" / resource.dataset / resource.filename),
                          "mirror_path": f"{resource.dataset}/{resource.filename}"})
    return files


@pytest.mark.parametrize(("argv", "wanted"), [
    (["all"], {name: {} for name in registry.registered()}),
    (["omniglot", "--omniglot-sets", "small1", "small2"], {"omniglot": {"sets": ["small1", "small2"]}}),
    (["emnist", "mnist", "--split", "letters", "--shape", "14x14"], {"emnist": {}, "mnist": {}}),
    (["backgrounds", "--backgrounds", "hard"], {"backgrounds": {"names": ["hard"]}}),
])
def test_list_prints_every_file_the_datasets_and_options_need_as_text_and_json(argv, wanted, tmp_path):
    data_dir = tmp_path / "data"
    as_json = listed(*argv, "--json", "--data-dir", data_dir, env={"GLYPHFORGE_OFFLINE": "1"})
    assert as_json.returncode == 0, as_json.stderr
    files = expected_files(wanted, data_dir)
    known = [file["size"] for file in files if file["size"] is not None]
    assert json.loads(as_json.stdout) == {
        "version": 1, "datasets": list(wanted), "files": files,
        "total": {"files": len(files), "bytes": sum(known), "files_of_unknown_size": len(files) - len(known)},
    }
    as_text = listed(*argv, "--data-dir", data_dir)
    assert as_text.returncode == 0, as_text.stderr
    lines = as_text.stdout.splitlines()
    for file in files:
        size = "size not registered" if file["size"] is None else f"{file['size']:,} bytes"
        block = [f"{file['mirror_path']}  {size}  {file['hash']}", *(f"  url     {url}" for url in file["urls"]),
                 f"  place   {file['place']}", f"  mirror  <mirror folder>/{file['mirror_path']}"]
        start = lines.index(block[0])
        assert lines[start:start + len(block)] == block
    assert lines[-1].startswith(f"total: {len(files)} file{'s' * (len(files) > 1)}, {sum(known):,} bytes (")
    assert not list(data_dir.rglob("*"))  # nothing written (the data dir may be made: --data-dir's check)
    if argv == ["all"]:  # what the Quick start says: 28 files, 643.6 MB and space.jpg
        assert (len(files), sum(known), len(files) - len(known)) == (28, 643_596_434, 1)
        assert "red_x.svg" not in as_text.stdout  # never fetched: only the source of red_x.png


def test_files_given_as_local_copies_are_neither_listed_nor_fetched(tmp_path):
    """``--emnist-archive ZIP`` is what preparing EMNIST reads: --list leaves gzip.zip out, as preparing does."""
    own = tmp_path / "gzip.zip"
    own.write_bytes(b"the user's copy")
    as_json = listed("emnist", "mnist", "--emnist-archive", own, "--json", "--data-dir", tmp_path / "data")
    assert as_json.returncode == 0, as_json.stderr
    files = json.loads(as_json.stdout)["files"]
    assert [file["file"] for file in files] == [resource.filename for resource in registry.needed("mnist")]
    assert registry.needed("emnist") and not registry.needed("emnist", archives={"gzip.zip": own})
    small = registry.needed("omniglot", sets=["small1", "small2"])
    for name in ("small1", "images_background_small1.zip"):  # a set's name or its file's, as archives= takes
        assert registry.needed("omniglot", sets=["small1", "small2"], archives={name: own}) == small[1:]


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_download_only_fills_a_mirror_folder_that_an_offline_run_prepares_from(form, shared_data, http_server,
                                                                               tmp_path):
    http_server.directory = shared_data  # serves <dataset>/<file>: a mirror
    mirror = tmp_path / "mirror"
    datasets = ["omniglot", "backgrounds", "--omniglot-sets", "small1", "--backgrounds", "water", "ice", "blue_x"]
    fetched = run_here("prepare-data", *datasets, "--download-only", "--to", mirror,
                       "--mirror", http_server.base_url, "--data-dir", tmp_path / "unused")
    assert fetched.returncode == 0, fetched.stderr
    assert (f"4 files (1.8 MB) verified in {mirror}, laid out as a mirror. On the machine without network, with "
            f"{mirror} copied or mounted there:\n  prepare-data omniglot backgrounds --omniglot-sets small1 "
            f"--backgrounds water ice blue_x --mirror {mirror} --offline\n") == fetched.stdout
    served = {**{f"omniglot/{name}": shared_data / "omniglot" / name for name in SMALL},
              **{f"backgrounds/{name}": shared_data / "backgrounds" / name for name in PICTURES}}
    assert sorted(str(path.relative_to(mirror)) for path in mirror.rglob("*") if path.is_file()
                  and not path.name.startswith(".")) == sorted(served)
    for path, source in served.items():
        assert (mirror / path).read_bytes() == source.read_bytes()
    assert CacheStore.for_data_dir(tmp_path / "unused").ls() == []  # nothing prepared
    requests = http_server.requests()
    again = run_here("prepare-data", *datasets, "--download-only", "--to", mirror, "--mirror", http_server.base_url,
                     "-q")
    assert (again.returncode, again.stdout, http_server.requests()) == (0, "", requests)  # verified: kept, skipped

    http_server.stop()  # the cluster: no network, only the folder
    data_dir = tmp_path / "cluster"
    given = str(mirror) if form == "path" else mirror.as_uri()
    prepared = run_here("prepare-data", *datasets, "--mirror", given, "--offline", "--data-dir", data_dir,
                        "--no-warmup", "-q")
    assert prepared.returncode == 0, prepared.stderr
    x, y, classes = gf.load_omniglot(sets="small1", data_dir=data_dir, download=False)
    assert x.shape == (2720, 105, 105) and len(classes) == 136
    pictures, labels, names = gf.load_backgrounds(["water", "ice", "blue_x"], data_dir=data_dir, download=False)
    assert list(names) == ["blue_x", "ice", "water"] and [p.shape[2] for p in pictures] == [3, 3, 3]


@pytest.fixture
def served(http_server):
    """A dataset ``served`` whose three files' origins are on the local server (nothing reaches the internet)."""
    for name, data in SERVED.items():
        http_server.add(f"origin/{name}", data)
    with served_dataset(http_server, SERVED, "three files on a local server (a test dataset)"):
        yield http_server


def test_a_corrupt_file_or_a_web_page_served_is_refused_named_and_not_left_in_the_mirror(served, tmp_path):
    served.corrupt("origin/b.bin")
    served.add("moved.html", b"<!DOCTYPE html><html><body>this file has moved</body></html>")
    served.content_type("moved.html", "text/html; charset=utf-8")
    served.redirect("origin/c.bin", "moved.html")
    mirror = tmp_path / "mirror"
    done = run_here("prepare-data", "served", "--download-only", "--to", mirror, "-q")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    error = done.stderr
    assert error.startswith("error: 2 upstream files (")
    assert (f"  - served/b.bin (2.4 KB, {bytes_hash(SERVED['b.bin'], 'sha256')}): place it at {mirror}/served/b.bin; "
            f"from {served.url('origin/b.bin')} ({served.url('origin/b.bin')}: wrong content: expected") in error
    assert "the bad download was deleted" in error
    assert (f"  - served/c.bin (3.3 KB, {bytes_hash(SERVED['c.bin'], 'sha256')}): place it at {mirror}/served/c.bin; "
            f"from {served.url('origin/c.bin')} ({served.url('origin/c.bin')}: answered with a web page "
            "(Content-Type text/html") in error
    assert f"the files already in {mirror} are kept, not fetched again" in error
    assert sorted(path.name for path in (mirror / "served").iterdir() if not path.name.startswith(".")) == ["a.bin"]
    assert not list(mirror.rglob("*.part"))


def test_a_file_in_the_to_folder_glyphforge_did_not_write_is_kept_and_named(served, tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "served").mkdir(parents=True)
    (mirror / "served" / "a.bin").write_bytes(b"my own a.bin")
    done = run_here("prepare-data", "served", "--download-only", "--to", mirror, "-q")
    assert done.returncode == 1, done.stderr
    assert f"error: {mirror}/served/a.bin is not {served.url('origin/a.bin')}: its hash is sha256:" in done.stderr
    assert "it never deletes or overwrites a file it did not download itself" in done.stderr
    assert (mirror / "served" / "a.bin").read_bytes() == b"my own a.bin"
    assert [(mirror / "served" / name).read_bytes() for name in ("b.bin", "c.bin")] == [SERVED["b.bin"],
                                                                                      SERVED["c.bin"]]


def assert_names_every_file(error: str, files: dict[str, str], data_dir: Path) -> None:
    """``error`` is one error naming each of ``files`` (``{dataset/file: url}``) with its placement path and URL."""
    assert error.count("error: ") == 1 and "Traceback" not in error
    assert error.startswith(f"error: {len(files)} upstream files (")
    for path, url in files.items():
        assert f"  - {path} (" in error
        assert f"place it at {data_dir / 'raw' / path}; from {url}" in error


def test_an_offline_run_names_every_missing_file_at_once(tmp_path):
    data_dir = tmp_path / "data"
    done = run_here("prepare-data", "omniglot", "backgrounds", "--omniglot-sets", "small1", "small2",
                    "--backgrounds", "water", "ice", "--offline", "--data-dir", data_dir, "--no-warmup", "-q")
    assert done.returncode == 1
    wanted = {"omniglot": {"sets": ["small1", "small2"]}, "backgrounds": {"names": ["water", "ice"]}}
    files = {f"{r.dataset}/{r.filename}": r.url for name, options in wanted.items()
             for r in registry.needed(name, **options)}
    assert len(files) == 4
    assert_names_every_file(done.stderr, files, data_dir)
    command = "prepare-data omniglot backgrounds --omniglot-sets small1 small2 --backgrounds water ice"
    assert (f"What to do: on a machine with network, run `{command} --download-only --to DIR`, copy DIR here (or "
            f"mount it) and run `{command} --mirror DIR --offline`; or place each file at the path shown "
            f"(`{command} --list` lists them all, with sizes and hashes).") in done.stderr


def test_a_run_where_every_url_fails_names_every_missing_file_at_once(served, tmp_path):
    for name in SERVED:
        served.fail(f"origin/{name}", 404, times=None)
    data_dir = tmp_path / "data"
    done = run_here("prepare-data", "served", "--data-dir", data_dir, "--no-warmup", "-q")
    assert done.returncode == 1
    assert_names_every_file(done.stderr, {f"served/{name}": served.url(f"origin/{name}") for name in SERVED},
                            data_dir)
    assert "The first of them in full: could not get served/a.bin" in done.stderr
    assert served.requests("origin/a.bin") == 1  # the first failure; the others looked for without the network
    assert served.requests("origin/b.bin") == served.requests("origin/c.bin") == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--json"], "--json is the format of --list: add --list"),
    (["--list", "--download-only", "--to", "{tmp}/m"], "--list prints the files and --download-only fetches them"),
    (["--to", "{tmp}/m"], "is the folder --download-only fetches the files into: add --download-only"),
    (["--download-only"], "--download-only needs the folder to fetch the files into: add --to DIR"),
    (["--download-only", "--to", "{tmp}/m", "--mirror", "{tmp}/m/"], "is also a mirror ({tmp}/m/"),
    (["--download-only", "--to", "file://{tmp}/m", "--mirror", "{tmp}/./m"], "is also a mirror ({tmp}/./m"),
    (["--download-only", "--to", "s3://bucket/mirror"], "is a URL: give a directory on this machine for --to"),
    (["--omniglot-sets", "nope", "--list"], "unknown Omniglot sets 'nope'"),
])
def test_contradicting_file_arguments_are_refused_before_any_work(argv, message, tmp_path):
    data_dir = tmp_path / "data"
    done = run_here("prepare-data", "omniglot", *[arg.format(tmp=tmp_path) for arg in argv], "--data-dir", data_dir)
    assert done.returncode == 2
    assert message.format(tmp=tmp_path) in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "m").exists()
    assert not list(data_dir.rglob("*"))  # nothing written (the data dir may be made: --data-dir's check)


@pytest.mark.parametrize("command", [
    "download-only", pytest.param("prepare", marks=pytest.mark.slow)])  # 8-10 s: two processes prepare two sets
def test_two_ranks_at_once_in_one_folder_fetch_each_file_once(command, shared_data, http_server, tmp_path):
    """pytorch/tutorials#3065: every rank of a job runs the same download at once (real processes, one folder):
    ``--download-only --to`` one mirror folder, or preparing into one data dir."""
    http_server.directory = shared_data
    first, second = (f"omniglot/images_background_small{n}.zip" for n in (1, 2))
    gate = http_server.hold(first)
    mirror, data_dir = tmp_path / "mirror", tmp_path / "data"
    argv = [str(BIN / "prepare-data"), "omniglot", "--omniglot-sets", "small1", "small2", "--mirror",
            http_server.base_url, "--data-dir", str(data_dir), "--no-warmup"]
    argv += ["--download-only", "--to", str(mirror)] if command == "download-only" else ["-q"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # this checkout's glyphforge
    logs = [tmp_path / f"rank-{rank}.log" for rank in range(2)]
    ranks = []
    for log in logs:
        with open(log, "w") as stderr:
            ranks.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env))
    try:
        wait_until(lambda: http_server.requests(first) == 1 and any(
            f"waiting for another process fetching {first}" in log.read_text() for log in logs),
            "one rank to download and the other to wait for it")
        gate.set()
        outputs = [rank.communicate(timeout=300)[0] for rank in ranks]
    finally:
        gate.set()
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
    assert [rank.returncode for rank in ranks] == [0, 0], [log.read_text() for log in logs]
    assert (http_server.requests(first), http_server.requests(second)) == (1, 1)
    folder = mirror if command == "download-only" else data_dir / "raw"
    for path in (first, second):
        assert (folder / path).read_bytes() == (shared_data / path).read_bytes()
    if command == "download-only":
        assert all(output.startswith(f"2 files (2.9 MB) verified in {mirror}") for output in outputs)
    else:  # each set's entry made once, by one of them
        assert sorted(entry.params["set"] for entry in CacheStore.for_data_dir(data_dir).ls()) == ["small1", "small2"]


# -- issue #42 row 17: what is in the way, or a folder that cannot be written, named; no .part left behind ---------
@pytest.mark.parametrize("in_the_way", [["b.bin"], ["a.bin", "c.bin"]], ids=["one file", "two files"])
@pytest.mark.parametrize("command", ["download-only", "prepare"])
def test_a_directory_where_a_file_goes_is_named_kept_and_nothing_is_fetched_for_it(served, tmp_path, command,
                                                                                    in_the_way):
    if command == "download-only":
        folder, argv = tmp_path / "mirror" / "served", ["--download-only", "--to", tmp_path / "mirror"]
    else:
        folder, argv = tmp_path / "data" / "raw" / "served", ["--data-dir", tmp_path / "data", "--no-warmup"]
    for name in in_the_way:
        (folder / name).mkdir(parents=True)
        (folder / name / "mine.txt").write_text("mine")

    done = run_here("prepare-data", "served", *argv, "-q")

    assert done.returncode == 1 and "Errno" not in done.stderr and "Traceback" not in done.stderr
    for name in in_the_way:
        assert (f"{folder / name} is a directory, where the file {name} goes: glyphforge never replaces what it did "
                "not write, so it fetched nothing. Move it away and run again") in done.stderr
        assert served.requests(f"origin/{name}") == 0 and (folder / name / "mine.txt").read_text() == "mine"
    assert "check the network" not in done.stderr
    assert not list(tmp_path.rglob("*.part"))


@pytest.mark.parametrize("where", ["the folder itself", "a folder to be made in it"])
def test_a_to_folder_on_a_read_only_file_system_is_named_before_any_work(served, tmp_path, where):
    with tmpfs(tmp_path / "read-only", "size=1m,ro") as read_only:
        to = read_only if where == "the folder itself" else read_only / "mirror"
        done = run_here("prepare-data", "served", "--download-only", "--to", to, "-q")
    assert done.returncode == 2 and "Errno" not in done.stderr and "Traceback" not in done.stderr
    said = (f"--to {to}: the files cannot be written there: it is on a read-only file system" if to == read_only else
            f"--to: the data dir {to} does not exist and cannot be made in {read_only}: it is on a read-only file "
            "system")
    assert said in done.stderr
    assert "check the network" not in done.stderr
    assert sum(served.requests(f"origin/{name}") for name in SERVED) == 0
