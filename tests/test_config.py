from pathlib import Path

import platformdirs
import pytest

from glyphforge import config
from glyphforge.cache import CacheStore
from glyphforge.storage.shard_cache import ShardCache


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
    assert config.mirror_setting() == ("file:///a", "https://b/c")
    assert config.offline_setting() is False
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    assert config.offline_setting() is True


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



#: A size of 400 digits: more bytes than any disk, and more than a float holds.
HUGE = "9" * 400
#: Every size or number setting: ``{setting: (its variable or None, the call reading it given its value)}``.
NUMBER_SETTINGS = {
    "decoded_budget=": (None, lambda value: config.decoded_budget_setting(value)),
    "decoded_budget= (an int)": (None, lambda value: config.decoded_budget_setting(int(value))),
    "$GLYPHFORGE_DECODED_BUDGET": ("GLYPHFORGE_DECODED_BUDGET", lambda value: config.decoded_budget_setting(None)),
    "cache_size=": (None, lambda value: ShardCache(size=value)),
    "$GLYPHFORGE_CACHE_SIZE": ("GLYPHFORGE_CACHE_SIZE", lambda value: ShardCache().size),
    "evict(max_size)": (None, lambda value: CacheStore(config.cache_dir()).evict(value)),
    "lock_timeout= (an int)": (None, lambda value: config.lock_timeout(int(value))),
    "$GLYPHFORGE_LOCK_TIMEOUT": ("GLYPHFORGE_LOCK_TIMEOUT", lambda value: config.lock_timeout()),
}


@pytest.mark.parametrize("setting", NUMBER_SETTINGS)
def test_a_number_of_400_digits_is_refused_as_abc_is(setting, tmp_path, monkeypatch):
    """Row 12 of issue 42: a raw OverflowError (cannot convert float infinity to integer)."""
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "cache"))
    variable, call = NUMBER_SETTINGS[setting]
    words = "is not a size" if "lock" not in setting.lower() else "give the seconds to wait"
    for value in ("abc", HUGE):
        if variable:
            monkeypatch.setenv(variable, value)
        with pytest.raises(ValueError, match=words) as refused:
            call(value if "int" not in setting or value == HUGE else "-1")
        assert type(refused.value) is ValueError  # not an OverflowError
