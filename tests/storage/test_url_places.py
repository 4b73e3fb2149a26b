"""Issue #30, rows 5, 6, 11 and 13: what a data dir or entry URL names, checked where it is parsed.

* A ``file://`` data dir or entry is the path it names (row 5: a data dir that has been read
  holds ``.KEY.lock`` files, which a URL listing took for entries; row 6: a relative
  ``file://`` entry, pickled into a process started in another directory, was not found).
* A store's listing (s3://, gs://, a file:// `Location`) never takes a lock, a staging
  folder or an entry's work or decoded folder for an entry.
* An unsupported scheme (row 11) or a malformed URL (row 13) is one `UnsupportedURLError`
  (a ValueError; `MalformedURLError` for the latter) when it is parsed, before any fsspec
  call or network work; on the command line, exit 2 and one clean paragraph.
"""
from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import build
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache.remote.entries import RemoteCache
from glyphforge.context import DataContext
from glyphforge.storage import Location, MalformedURLError, UnsupportedURLError

from support.cli import BIN, run_here
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.optional import NO_TORCH
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

SPEC = RowSpec(n_examples=230, shard_size=50)
NOISE = ("Traceback", "Exception ignored")


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> tuple[Path, BuiltDataset, dict[str, np.ndarray]]:
    """``<root>/data``, a data dir holding one build that has been read (its lock files are there) and its decoded
    copy; the build and its rows."""
    root = tmp_path_factory.mktemp("place")
    dataset = build(SPEC, data_dir=root / "data", progress=False)
    arrays = dataset.reopened().arrays
    assert dataset.reopened().materialize() == dataset.path.with_name(f"{dataset.key}.decoded")
    locks = sorted(path.name for path in dataset.path.parent.iterdir() if path.name.startswith("."))
    assert f".{dataset.key}.lock" in locks, locks  # what a URL listing took for an entry
    return root, dataset, arrays


def command(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
            here: bool = False) -> subprocess.CompletedProcess[str]:
    """Run an installed console script (``argv[0]``) in ``cwd``: a real process, or its entry point in this one."""
    if here:
        return run_here(str(argv[0]), *argv[1:], env=env, cwd=cwd)
    return subprocess.run([str(BIN / str(argv[0])), *map(str, argv[1:])], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, **(env or {})})


def clean_refusal(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """A bad argument: exit 2, nothing on stdout, no traceback or third-party noise, ``words`` in the message."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and not any(noise in result.stderr for noise in NOISE), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


# -- rows 5 and 6: a file:// URL is its path ----------------------------------------------------------------
READERS = {
    "cache ls": ["cache", "ls"],
    "cache verify": ["cache", "verify"],
    "info": ["info"],
    "export": ["export", "test-rows", "OUT"],
    "preview": ["preview", "test-rows", "--out", "OUT.png", "-n", "2"],
}


@pytest.mark.parametrize("name", READERS)
def test_a_command_reads_a_file_url_data_dir_exactly_as_its_path(place, name, tmp_path):
    """Row 5: ``export --data-dir file:///...`` retried a lock file's "manifest" for ~12 s, then failed."""
    root, dataset, arrays = place
    runs = {}
    for form, data_dir in [("path", root / "data"), ("url", (root / "data").as_uri()), ("relative", "file://data")]:
        argv = [str(word).replace("OUT", str(tmp_path / form)) for word in READERS[name]]
        result = command(["glyphforge", *argv, "--data-dir", data_dir], cwd=root, here=True)
        assert result.returncode == 0 and "trying again" not in result.stderr, result.stderr
        runs[form] = re.sub(r"\d+\.\d s\b", "N s", result.stdout.replace(str(tmp_path / form), "OUT"))
    assert runs["url"] == runs["path"] and runs["relative"] == runs["path"]
    if name == "export":
        for form in ("url", "relative"):
            for array_name, array in arrays.items():
                assert np.array_equal(np.load(tmp_path / form / f"{array_name}.npy"), array)


def test_a_relative_file_url_entry_opens_from_any_directory_once_parsed(place, tmp_path, monkeypatch):
    """Row 6: a relative file:// entry, pickled into a process started elsewhere, was "no built dataset at"."""
    root, dataset, arrays = place
    monkeypatch.chdir(root)
    relative = f"file://data/cache/test-rows/{dataset.key}"
    opened = gf.open_built(relative)
    assert type(opened) is BuiltDataset and opened.path == dataset.path  # the local reader, its absolute path
    assert find_built("test-rows", data_dir="file://data").path == dataset.path
    context = DataContext.resolve(data_dir="file://data")
    assert (context.remote, context.data_dir) == (None, root / "data")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sent = pickle.dumps((opened.stream(64, seed=2), context))
    child = subprocess.run(
        [sys.executable, "-c", "import pickle, sys\n"
         "stream, context = pickle.loads(sys.stdin.buffer.read())\n"
         "import numpy as np\n"
         "rows = np.concatenate([np.asarray(targets['row']) for _, targets in stream])\n"
         "print(context.data_dir, rows.tolist())"],
        input=sent, capture_output=True, cwd=elsewhere, timeout=300)
    assert child.returncode == 0, child.stderr.decode()
    shown, rows = child.stdout.decode().split(" ", 1)
    expected = np.concatenate([np.asarray(targets["row"]) for _, targets in dataset.stream(64, seed=2)])
    assert shown == str(root / "data") and eval(rows) == expected.tolist()  # noqa: S307 (a list of ints we printed)


@pytest.mark.slow
def test_dataloader_workers_spawned_in_another_directory_read_a_relative_file_url_entry(place, tmp_path,
                                                                                       monkeypatch):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    root, dataset, arrays = place
    monkeypatch.chdir(root)
    opened = gf.open_built(f"file://data/cache/test-rows/{dataset.key}")
    monkeypatch.chdir(tmp_path)  # the workers start here, where file://data names nothing
    loader = torch.utils.data.DataLoader(opened.stream(64, seed=1), batch_size=None, num_workers=1,
                                         multiprocessing_context="spawn")
    rows = np.concatenate([np.asarray(targets["row"]) for _, targets in loader])
    assert sorted(rows.tolist()) == list(range(len(dataset)))


# -- a store's listing takes nothing but entries for entries -------------------------------------------------
def _store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    if backend == "file":
        return Location(f"file://{tmp_path}/store", {"auto_mkdir": True})  # the URL stack (a publish target)
    server = request.getfixturevalue({"s3": "s3_server", "gs": "gcs_server"}[backend])
    return Location(server.bucket()).child("data")


@pytest.mark.parametrize("backend", ["s3", "gs", "file"])
def test_a_store_listing_takes_no_lock_staging_or_work_folder_for_an_entry(place, backend, request, tmp_path):
    root, dataset, arrays = place
    data_dir = _store(backend, request, tmp_path)
    kind_dir = data_dir.child("cache", "test-rows")
    fs = data_dir.fs
    manifest = (dataset.path / "manifest.json").read_bytes()
    for name in sorted(path.name for path in dataset.path.iterdir()):
        fs.pipe_file(kind_dir.child(dataset.key, name).path, (dataset.path / name).read_bytes())
    for where, data in [(kind_dir.child(f".{dataset.key}.lock"), b""), (kind_dir.child(f"{dataset.key}.work",
                        "build.json"), b"{}"), (kind_dir.child(f"{dataset.key}.decoded", "images.npy"), b"x"),
                        (kind_dir.child(f".tmp-{dataset.key}-1", "manifest.json"), manifest),
                        (data_dir.child("cache", ".tmp-2", "manifest.json"), manifest)]:
        fs.pipe_file(where.path, data)  # a lock, a work, decoded or staging folder: no entry

    scan = RemoteCache(data_dir).scan()
    assert [entry.key for entry in scan.entries] == [dataset.key] and scan.incomplete == [] and scan.broken == []
    for target in ("test-rows", dataset.key[:8]):
        found = find_built(target, data_dir)
        assert found.key == dataset.key and np.array_equal(found[7][0], arrays["images"][7])
    if backend != "file":  # on the command line (a file:// data dir is its path there: see above)
        listed = command(["glyphforge", "cache", "ls", "--data-dir", data_dir.url], cwd=tmp_path, here=True)
        assert listed.returncode == 0 and "not listed" not in listed.stderr, listed.stderr
        assert listed.stdout.count("test-rows") == 1


# -- row 11: unsupported schemes; row 13: malformed URLs ---------------------------------------------------
UNSUPPORTED = ["ftp://host/data", "sftp://host/data", "hdfs://namenode/data", "webhdfs://host/data",
               "memory://data", "nosuch://host/data"]
MALFORMED = {"s3://": "names no bucket", "s3:///nobucket": "names no bucket", "gs://": "names no bucket",
             "https://": "names no host", "https:///x": "names no host", "s3://my bucket/x": "not a bucket name",
             "gs://Capitals/x": "not a bucket name", "https://host:http/x": "port is not a number"}


def _python_calls(url: str) -> dict[str, object]:
    return {
        "open_built": lambda: gf.open_built(f"{url}/cache/test-rows/{'0' * 64}"),
        "find_built": lambda: find_built("test-rows", data_dir=url),
        "DataContext.resolve": lambda: DataContext.resolve(data_dir=url),
        "publish": lambda: gf.publish("test-rows", url, progress=False),
        "Location": lambda: Location(url),
    }


@pytest.mark.parametrize("url", UNSUPPORTED)
@pytest.mark.parametrize("call", list(_python_calls("x://y")))
def test_an_unsupported_scheme_is_one_value_error_naming_what_is_supported(url, call):
    """Row 11: ``open_built("ftp://...")`` was a TypeError from fsspec's FTP filesystem."""
    scheme = url.split("://")[0]
    with pytest.raises(UnsupportedURLError, match=rf"does not support {scheme}:// URLs; it takes s3://BUCKET/prefix, "
                                                  r"gs://BUCKET/prefix, https://HOST/path .*file:///abs/path"):
        _python_calls(url)[call]()


@pytest.mark.parametrize("url", MALFORMED)
@pytest.mark.parametrize("call", list(_python_calls("x://y")))
def test_a_malformed_url_is_refused_when_parsed(url, call):
    """Row 13: ``s3://`` and ``s3:///nobucket`` went to the network."""
    with pytest.raises(MalformedURLError, match=re.escape(MALFORMED[url])):
        _python_calls(url)[call]()


def test_an_alias_scheme_and_the_environment_s_data_dir_are_named():
    with pytest.raises(UnsupportedURLError, match=r"s3a://b-1/x: glyphforge spells s3a:// as s3://: write s3://b-1/x"):
        Location("s3a://b-1/x")
    os.environ["GLYPHFORGE_DATA_DIR"] = "ftp://host/data"  # restored by the suite's autouse fixture
    with pytest.raises(UnsupportedURLError, match=r"^\$GLYPHFORGE_DATA_DIR: ftp://host/data: glyphforge does not"):
        DataContext.resolve()


DATA_DIR_COMMANDS = {
    "info": ["glyphforge", "info"],
    "cache ls": ["glyphforge", "cache", "ls"],
    "cache verify": ["glyphforge", "cache", "verify"],
    "cache rm": ["glyphforge", "cache", "rm", "abcdef"],
    "cache gc": ["glyphforge", "cache", "gc"],
    "preview": ["glyphforge", "preview", "scenes", "--out", "p.png"],
    "export": ["glyphforge", "export", "scenes", "out"],
    "publish (--data-dir)": ["glyphforge", "publish", "scenes", "s3://bucket/x"],
    "build": ["glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "5"],
    "prepare-data": ["prepare-data", "backgrounds", "--offline"],
}


@pytest.mark.parametrize("url", ["ftp://host/data", "s3:///nobucket"])
@pytest.mark.parametrize("name", [*DATA_DIR_COMMANDS, "publish (target)"])
def test_every_command_refuses_an_unsupported_or_malformed_url_with_exit_2(name, url, tmp_path):
    """Rows 11 and 13 on the command line: fsspec's "Exception ignored ..." noise, or exit 1 after the network.

    Each command runs as a real process with the unsupported scheme (its exit status, and no noise at its
    exit), and in this process with the malformed URL (refused where it is parsed, as the first).
    """
    argv = (["glyphforge", "publish", "scenes", url] if name == "publish (target)"
            else [*DATA_DIR_COMMANDS[name], "--data-dir", url])
    result = command(argv, cwd=tmp_path, here=url.startswith("s3:"))
    clean_refusal(result, url, "does not support ftp:// URLs; it takes s3://BUCKET/prefix" if url.startswith("ftp")
                  else "names no bucket: write s3://BUCKET/prefix")
    assert list(tmp_path.iterdir()) == []  # nothing made, not even the data dir


@pytest.mark.parametrize("name", ["export", "cache ls"])
def test_an_unsupported_url_in_the_environment_exits_2_naming_the_variable(name, tmp_path):
    result = command(DATA_DIR_COMMANDS[name], cwd=tmp_path, env={"GLYPHFORGE_DATA_DIR": "ftp://host/data"},
                     here=name == "export")  # one real process
    clean_refusal(result, "error: $GLYPHFORGE_DATA_DIR: ftp://host/data: glyphforge does not support ftp:// URLs")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", [url for url in MALFORMED if not url.startswith("s3:///")])
def test_publish_refuses_a_malformed_target_before_any_work(place, url, tmp_path):
    result = command(["glyphforge", "publish", "test-rows", url, "--data-dir", place[0] / "data"], cwd=tmp_path,
                     here=True)  # a real process refuses a publish target in test_every_command_refuses_...
    clean_refusal(result, f"argument url: {url}", MALFORMED[url])
    assert list(tmp_path.iterdir()) == []


# -- issue 42, row 15: bucket names the store refuses -------------------------------------------------------
#: Bucket names S3 and GCS refuse, and the rule each breaks.
BAD_BUCKETS = {
    "s3://UpperCase/data": "it holds 'C', 'U'",
    f"s3://{'a' * 71}/data": "it has 71 characters",
    "s3://bucket\n/data": "it holds '\\n'",
    "s3://my_bucket/data": "it holds '_'",
    "s3://192.168.5.4/data": "it is an IP address",
    "s3://xn--bucket/data": "S3 keeps its prefix or suffix for itself",
    f"gs://{'a' * 64}/data": "it has 64 characters",
    "gs://google-data/data": "Google keeps names",
}
#: Every place a bucket URL is given: ``(arguments, environment)`` for the URL.
BUCKET_PLACES = {
    "--data-dir": lambda url: (["glyphforge", "cache", "ls", "--data-dir", url], {}),
    "$GLYPHFORGE_DATA_DIR": lambda url: (["glyphforge", "cache", "ls"], {"GLYPHFORGE_DATA_DIR": url}),
    "--mirror": lambda url: (["prepare-data", "backgrounds", "--mirror", url], {}),
    "$GLYPHFORGE_MIRROR": lambda url: (["prepare-data", "backgrounds"], {"GLYPHFORGE_MIRROR": url}),
    "publish target": lambda url: (["glyphforge", "publish", "scenes", url], {}),
}


@pytest.mark.parametrize(("place", "url"), [(place, url) for place in BUCKET_PLACES for url in BAD_BUCKETS
                                             if not (place == "$GLYPHFORGE_MIRROR" and "\n" in url)])
def test_a_bucket_name_the_store_refuses_is_refused_at_parse_with_exit_2(place, url, tmp_path):
    """Upper case, 71 characters or a newline went to the network: 40-50 s of retries, then exit 1. (In
    $GLYPHFORGE_MIRROR a newline separates two mirrors, as a space does.)"""
    argv, env = BUCKET_PLACES[place](url)
    data_dir = [] if "DATA_DIR" in place or place == "--data-dir" else ["--data-dir", tmp_path / "data"]
    result = command([*argv, *data_dir], cwd=tmp_path, env=env, here=True)
    scheme = url.split("://")[0]
    clean_refusal(result, f"is not a bucket name {scheme}:// takes: {BAD_BUCKETS[url]}")
    assert list(tmp_path.iterdir()) == []
