"""A kind, dataset name, cache key or built target that names nothing is a bad argument (issue 30, row 16).

Every command that takes one exits 2 before any work, with no traceback, and its message lists
what there is; on a data dir at a URL (``file://``, ``s3://``) as on a path.
"""
from __future__ import annotations

import pytest

from glyphforge.builds import build
from glyphforge.cache.remote.publish import publish_entry

from support.cli import run, run_here
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec
from support.waits import wait_until


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data dir holding one built entry (kind test-rows); its key and entry."""
    data_dir = tmp_path_factory.mktemp("targets")
    dataset = build(RowSpec(), data_dir=data_dir, progress=False)
    wait_until(lambda: not list((data_dir / "cache" / RowSpec.kind).glob(".trash-*")),
               "the build's scratch files removed")  # in the background
    return data_dir, dataset.key, dataset.entry


@pytest.fixture(scope="module", params=["file", "s3"])
def url_data_dir(request, data_dir):
    """The data dir at a URL: file:// of the same directory, or one on S3 (moto) its entry is published to."""
    path, _, entry = data_dir
    if request.param == "file":
        return path.as_uri()
    url = request.getfixturevalue("s3_server").bucket() + "/data"
    publish_entry(entry, url, progress=False)
    return url


#: (command line, what the message must list): OUT is the output, DATA the data dir, URL the data dir at a URL.
LOCAL = {
    "export": (["glyphforge", "export", "nosuchkind", "OUT", "--data-dir", "DATA"], "Give a built kind (test-rows)"),
    "export key": (["glyphforge", "export", "0123456789ab", "OUT", "--data-dir", "DATA"], "(test-rows)"),
    "preview": (["glyphforge", "preview", "nosuch", "--out", "OUT", "--data-dir", "DATA"],
                "the kind of a built dataset (test-rows)"),
    "preview unprepared": (["glyphforge", "preview", "mnist", "--out", "OUT", "--data-dir", "DATA"],
                           "run `prepare-data mnist` first"),
    "publish": (["glyphforge", "publish", "nosuchkind", "file:///tmp/glyphforge-never", "--data-dir", "DATA"],
                "holds kinds test-rows"),
    "cache rm": (["glyphforge", "cache", "rm", "nosuchkey", "--data-dir", "DATA"], "holds test-rows KEY"),
    "cache rm short": (["glyphforge", "cache", "rm", "abc", "--data-dir", "DATA"], "holds test-rows KEY"),
    "prepare-data": (["prepare-data", "nosuch", "--offline", "--data-dir", "DATA"], "'emnist', 'fashion-mnist'"),
    "build": (["glyphforge", "build", "nosuch", "--data-dir", "DATA"], "choose from 'scenes'"),
    "build glyphs": (["glyphforge", "build", "scenes", "--glyphs", "nosuch", "--data-dir", "DATA"],
                     "'emnist', 'fashion-mnist'"),
}
AT_URL = {
    "export": (["glyphforge", "export", "nosuchkind", "OUT", "--data-dir", "URL"], "it holds test-rows"),
    "preview": (["glyphforge", "preview", "nosuch", "--out", "OUT", "--data-dir", "URL"], "it holds test-rows"),
    "export kind/key": (["glyphforge", "export", "test-rows/0123456789ab", "OUT", "--data-dir", "URL"],
                        "find the entries of its data dir"),
}


def assert_refused(argv: list[str], listed: str | None, data_dir, tmp_path, url: str = "", here: bool = True) -> str:
    """Run ``argv`` (in this process unless not ``here``); assert exit 2 before any work, with ``listed`` (unless None)
    in the message; return stderr."""
    path, key, _ = data_dir
    out = tmp_path / "out"
    given = [{"OUT": str(out), "DATA": str(path), "URL": url}.get(arg, arg) for arg in argv]
    before = sorted(path.rglob("*"))
    done = (run_here if here else run)(*given)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "run again with -v" not in done.stderr
    assert listed is None or listed.replace("KEY", key[:12]) in done.stderr
    assert done.stdout == "" and not out.exists() and sorted(path.rglob("*")) == before  # nothing done
    return done.stderr


@pytest.mark.parametrize("command", LOCAL)
def test_a_target_that_names_nothing_exits_2_listing_what_there_is(command, data_dir, tmp_path):
    assert_refused(*LOCAL[command], data_dir, tmp_path, here=command != "export")  # one real process


@pytest.mark.parametrize("command", AT_URL)
def test_a_target_that_names_nothing_at_a_url_exits_2_listing_what_there_is(command, data_dir, url_data_dir,
                                                                           tmp_path):
    argv, listed = AT_URL[command]
    if not url_data_dir.startswith("file:"):
        assert_refused(argv, listed, data_dir, tmp_path, url_data_dir)
        return
    # a file:// URL is the path it names: the same refusal, word for word, as with the plain path
    as_path = [{"URL": "DATA"}.get(arg, arg) for arg in argv]
    assert (assert_refused(argv, None, data_dir, tmp_path, url_data_dir)
            == assert_refused(as_path, None, data_dir, tmp_path))
