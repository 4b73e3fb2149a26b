from pathlib import Path

import platformdirs
import pytest

from glyphforge import config


def test_explicit_argument_wins_over_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path / "env"))
    assert config.data_dir(tmp_path / "arg") == tmp_path / "arg"


def test_environment_wins_over_default(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path / "env"))
    assert config.data_dir() == tmp_path / "env"


def test_default_is_platformdirs_user_data_dir(monkeypatch):
    monkeypatch.delenv("GLYPHFORGE_DATA_DIR")
    expected = Path(platformdirs.user_data_dir("glyphforge", appauthor=False))
    assert config.data_dir() == expected


def test_layout_under_data_dir(tmp_path):
    assert config.raw_dir("emnist", tmp_path) == tmp_path / "raw" / "emnist"
    assert config.cache_dir(tmp_path) == tmp_path / "cache"


def test_mirror_and_offline_variables(monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_MIRROR", " file:///a  https://b/c ")
    assert config.mirrors_from_env() == ("file:///a", "https://b/c")
    assert config.offline_from_env() is False
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    assert config.offline_from_env() is True


def test_lock_timeout_explicit_then_environment_then_an_hour(monkeypatch):
    monkeypatch.delenv("GLYPHFORGE_LOCK_TIMEOUT", raising=False)
    assert config.lock_timeout() == config.DEFAULT_LOCK_TIMEOUT == 3600
    monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", " 90 ")
    assert config.lock_timeout() == 90.0 and config.lock_timeout(5) == 5.0
    monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", "inf")
    assert config.lock_timeout() == float("inf")
    monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", "0")
    assert config.lock_timeout() == 0.0


@pytest.mark.parametrize("variable, argument, shown", [
    ("soon", None, r"\$GLYPHFORGE_LOCK_TIMEOUT is 'soon'"),
    ("-1", None, r"\$GLYPHFORGE_LOCK_TIMEOUT is '-1'"),
    ("nan", None, r"\$GLYPHFORGE_LOCK_TIMEOUT is 'nan'"),
    ("", -5, r"lock_timeout is -5"),
    ("", True, r"lock_timeout is True"),
    ("", "60", r"lock_timeout is '60'"),
])
def test_a_bad_lock_timeout_names_where_it_came_from(monkeypatch, variable, argument, shown):
    monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", variable)
    with pytest.raises(ValueError, match=shown + r": give the seconds to wait for a cache entry another process is "
                                               r"making, a number >= 0 such as 3600 \(0: give up at once, inf: wait"):
        config.lock_timeout(argument)


@pytest.mark.parametrize("url", ["s3://user:hunter2@bucket/data", "https://user:hunter2@host/data"])
def test_a_data_dir_url_with_a_password_is_refused_without_showing_it(url):
    with pytest.raises(ValueError, match="user and password in it") as refused:
        config.data_dir(url)
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match="user and password in it"):
        config.local_cache_dir(url)
