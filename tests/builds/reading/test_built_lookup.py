"""A kind with several built entries names none of them: an error listing them, or ``KIND:newest`` explicitly.

Issue 30, row 18: ``find_built("scenes")`` took the newest entry of the kind, so a script
went on with another dataset, without a word, once someone built one more into its data
dir. The same holds in a data dir on disk and at a URL (file://, S3), and for the CLI
commands taking a built target (export, preview, publish): exit 2 with the listing.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from glyphforge.builds import build
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache.lookup import AmbiguousKindError
from glyphforge.context import DataContext
from glyphforge.textfmt import human_size

from support.cli import run, run_here
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

KIND = "test-lookup"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A data dir with two entries of ``test-lookup`` (40 then 60 rows, a second apart) and one of ``test-single``."""
    data_dir = tmp_path_factory.mktemp("lookup")
    older = build(RowSpec(n_examples=40, shard_size=10, kind=KIND), data_dir=data_dir, progress=False)
    time.sleep(1.1)  # the manifests' `created` is to the second: the second entry is the newer one
    newer = build(RowSpec(n_examples=60, shard_size=10, kind=KIND), data_dir=data_dir, progress=False)
    single = build(RowSpec(n_examples=30, shard_size=10, kind="test-single"), data_dir=data_dir, progress=False)
    assert older.entry.manifest["created"] < newer.entry.manifest["created"]
    return data_dir, older, newer, single


@pytest.fixture(scope="module", params=["path", "file://", "s3://"])
def data_dir(request, built):
    """The data dir holding the entries: its path, its file:// URL, or an S3 data dir they were published to."""
    local, *entries = built
    if request.param == "path":
        return str(local)
    if request.param == "file://":
        return f"file://{local}"
    url = request.getfixturevalue("s3_server").bucket() + "/data"
    for dataset in entries:
        dataset.publish(url, progress=False)
    return url


def check_listing(message: str, older, newer) -> None:
    """``message`` lists both entries (key, size, when built, the parameter telling them apart) and says what to do."""
    assert message.startswith(f"{KIND!r} names 2 entries in ")
    assert "Give the key (a prefix of 6+ characters) of the one you mean" in message
    assert f"or ask for the newest explicitly with '{KIND}:newest'" in message
    lines = message.splitlines()
    assert lines[-4].split() == ["key", "size", "built", "parameters"]
    for line, dataset, rows in zip(lines[-2:], (older, newer), (40, 60), strict=True):
        assert line.startswith(f"{dataset.key[:12]}  {human_size(dataset.entry.size_bytes)}")
        assert dataset.entry.manifest["created"] in line and line.endswith(f"n_examples={rows} seed=0")


def test_find_built_of_a_kind_with_two_entries_lists_them(built, data_dir):
    _, older, newer, single = built
    with pytest.raises(AmbiguousKindError) as raised:
        find_built(KIND, data_dir)
    assert isinstance(raised.value, LookupError)
    check_listing(str(raised.value), older, newer)
    assert find_built(f"{KIND}:newest", data_dir).key == newer.key  # asked for explicitly
    assert find_built(older.key[:8], data_dir).key == older.key
    assert len(find_built("test-single", data_dir)) == len(single) == 30  # one entry: as before
    assert find_built("test-single:newest", data_dir).key == single.key
    with pytest.raises(LookupError, match="no built dataset 'test-none:newest'"):
        find_built("test-none:newest", data_dir)


def test_export_of_a_kind_with_two_entries_exits_2_with_the_listing(built, data_dir, tmp_path):
    _, older, newer, _ = built
    out = tmp_path / "out"
    refuse = run if data_dir.startswith("/") else run_here  # one real process's exit status; the others in this one
    result = refuse("glyphforge", "export", KIND, out, "--data-dir", data_dir)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr and "-v" not in result.stderr
    check_listing(result.stderr.removeprefix("error: ").rstrip("\n"), older, newer)
    assert not out.exists()
    chosen = run_here("glyphforge", "export", f"{KIND}:newest", out, "--data-dir", data_dir)
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.startswith(f"exported {KIND} {newer.key[:12]} (60 examples, ")
    assert np.array_equal(np.load(out / "row.npy"), np.arange(60))


@pytest.mark.parametrize("command", ["preview", "publish"])
def test_preview_and_publish_of_a_kind_with_two_entries_exit_2_with_the_listing(built, command, tmp_path):
    local, older, newer, single = built
    target = ["--out", tmp_path / "p.png"] if command == "preview" else [f"file://{tmp_path / 'published'}"]
    result = run_here("glyphforge", command, KIND, *target, "--data-dir", local)
    assert result.returncode == 2, result.stderr
    check_listing(result.stderr.removeprefix("error: ").rstrip("\n"), older, newer)
    assert not any(tmp_path.iterdir())  # nothing written
    chosen = run_here("glyphforge", command, f"{KIND}:newest", *target, "--data-dir", local)
    assert chosen.returncode == 0, chosen.stderr
    if command == "publish":
        assert chosen.stdout.strip() == f"file://{tmp_path / 'published'}/cache/{KIND}/{newer.key}"
    else:
        assert (tmp_path / "p.png").is_file()
    assert run_here("glyphforge", command, "test-single", *target, "--data-dir", local).returncode == 0


@pytest.mark.parametrize(("target", "why"), [
    ("nothing", "no entry there has a key starting 'nothing' (a damaged entry is not listed: `glyphforge cache "
                "verify` names it)"),
    ("abc", "cache key 'abc' is too short: give at least 6 characters of it"),
], ids=["no match", "too short"])
def test_a_target_naming_nothing_is_said_the_same_on_disk_and_at_a_url(built, data_dir, target, why):
    """Issue #44: one lookup of built entries over the store protocol, so one message wherever the data dir lies."""
    where = DataContext.resolve(data_dir=data_dir).entry_store.where
    with pytest.raises(LookupError) as raised:
        find_built(target, data_dir)
    assert str(raised.value) == (f"no built dataset {target!r} in {where}: it is no built kind, and {why}. Give a "
                                 "built kind (test-lookup, test-single) or a cache key (prefix); it holds test-lookup, "
                                 "test-single")


def test_a_lookup_at_a_url_sizes_the_shard_cache_by_the_size_given_not_the_environment(built, tmp_path,
                                                                                        monkeypatch, s3_server):
    url = s3_server.bucket() + "/data"
    built[3].publish(url, progress=False)
    monkeypatch.setenv("GLYPHFORGE_CACHE_SIZE", "not a size")  # read only when nothing is given
    found = find_built("test-single", data_dir=url, cache_dir=tmp_path / "cache", cache_size="1GiB")
    assert found.key == built[3].key and len(found) == 30
