"""URLs as data dirs: `Location`, `is_url`, and the data context of a URL data dir (no server needed)."""
from __future__ import annotations

import pickle

import pytest

from glyphforge import config
from glyphforge.context import DataContext
from glyphforge.storage import Location, UnsupportedURLError, is_url
from glyphforge.urls import redacted


@pytest.mark.parametrize(("value", "expected"), [
    ("s3://bucket/x", True), ("gs://b", True), ("https://host/a", True), ("file:///tmp/a", True),
    ("C:\\data", False), ("./s3:x", False), ("/tmp/s3://x", False), ("data", False), (None, False),
])
def test_is_url_tells_urls_from_paths(value, expected):
    assert is_url(value) is expected


def test_a_location_pickles_without_its_secrets():
    location = Location("s3://bucket/data/", {"endpoint_url": "http://127.0.0.1:9", "key": "K", "secret": "S"})
    assert location.url == "s3://bucket/data"
    assert location.path == "bucket/data"
    assert location.child("cache", "scenes").url == "s3://bucket/data/cache/scenes"
    assert location.child("cache").storage_options["secret"] == "S"
    copy = pickle.loads(pickle.dumps(location))
    assert copy.url == location.url
    assert copy.storage_options == {"endpoint_url": "http://127.0.0.1:9"}


def test_a_password_in_a_url_is_refused_without_showing_it():
    with pytest.raises(UnsupportedURLError, match="user and password in it") as refused:
        Location("https://alice:s3cr3t@example.org/data")
    assert "s3cr3t" not in str(refused.value)
    assert Location("https://alice@example.org/data").url == "https://alice@example.org/data"  # no secret


@pytest.mark.parametrize(("text", "shown"), [
    ("https://alice:s3cr3t@host:8443/m/a.bin", "https://***@host:8443/m/a.bin"),
    ("https://s3cr3t@host/m", "https://***@host/m"),
    ("http://alice:p@ss@s3cr3t@host/m", "http://***@host/m"),  # '@' in a password not escaped: the last one counts
    ("from https://host/x?X-Amz-Signature=s3cr3t&b=1.", "from https://host/x?***."),
    ("s3://bucket/x?secret=s3cr3t: gave up", "s3://bucket/x?***: gave up"),
    ("Max retries exceeded with url: /m/a.bin?token=s3cr3t (Caused by X)",
     "Max retries exceeded with url: /m/a.bin?*** (Caused by X)"),
    ("'https://alice:s3cr3t@host/m' is not supported", "'https://***@host/m' is not supported"),
    ("is it? (? examples) file:///tmp/x C:\\data", "is it? (? examples) file:///tmp/x C:\\data"),
])
def test_one_rule_shows_urls_without_user_info_or_query_strings(text, shown):
    assert redacted(text) == shown and "s3cr3t" not in redacted(text)


def test_a_scheme_without_a_filesystem_names_what_to_do():
    with pytest.raises(UnsupportedURLError, match="nosuchscheme://x/y"):
        _ = Location("nosuchscheme://x/y").fs
    with pytest.raises(UnsupportedURLError, match="not a URL"):
        Location("/tmp/x")


def test_a_url_data_dir_is_never_taken_for_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="s3://bucket/x is a URL"):
        config.data_dir("s3://bucket/x")
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", "s3://bucket/y")
    with pytest.raises(ValueError, match=r"s3://bucket/y \(from \$GLYPHFORGE_DATA_DIR\) is a URL"):
        config.data_dir()
    assert list(tmp_path.iterdir()) == []  # no directory named "s3:"


def test_the_context_of_a_url_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "local"))
    context = DataContext.resolve(data_dir="s3://bucket/x", storage_options={"endpoint_url": "http://e"})
    assert context.remote == Location("s3://bucket/x")
    assert context.remote is not None and context.remote.storage_options == {"endpoint_url": "http://e"}
    assert context.data_dir == tmp_path / "local" / "data"
    kept = DataContext.resolve(context, offline=True)
    assert (kept.remote, kept.offline, kept.remote.storage_options) == (context.remote, True, {"endpoint_url": "http://e"})
    assert DataContext.resolve(context, data_dir=tmp_path / "d").remote is None
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", "gs://bucket/z")
    assert DataContext.resolve().remote == Location("gs://bucket/z")
    with pytest.raises(ValueError, match="storage_options apply to a data dir that is a URL"):
        DataContext.resolve(data_dir=tmp_path, storage_options={"anon": True})
    assert pickle.loads(pickle.dumps(context)) == context


def test_a_url_data_dir_in_the_environment_is_no_place_for_numba_s_cache(tmp_path, monkeypatch):
    from glyphforge.pipelines import numba_cache

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", "s3://bucket/data")
    monkeypatch.setattr(numba_cache, "PACKAGE_CACHE", blocked / "pycache")  # neither is writable:
    monkeypatch.setattr(numba_cache.platformdirs, "user_cache_dir", lambda *args, **kwargs: str(blocked / "cache"))
    assert numba_cache.configure() is None  # numba's default stays: no candidate, and no failure
    assert config.data_dir_on_disk() is None


@pytest.mark.parametrize("url", ["s3://bucket/data", "gs://bucket/data", "https://host/data", "file:///tmp/data"])
def test_a_location_below_another_is_the_checked_location_of_its_url_with_the_same_options(url):
    parent = Location(url, {"anon": True})
    parent.backend  # noqa: B018 (its backend made: those below it are of its class)
    for below, text in [(parent.child("cache", "k/"), f"{url}/cache/k"), (parent.suffixed(".work"), f"{url}.work"),
                        (parent.child("a b"), f"{url}/a b")]:
        checked = Location(text, {"anon": True})
        assert (below.url, below.storage_options, type(below.backend)) == (
            checked.url, checked.storage_options, type(checked.backend))
    for name in ["a?token=x", "a#b"]:
        with pytest.raises(UnsupportedURLError, match="takes none with a query string or fragment"):
            parent.child(name)
