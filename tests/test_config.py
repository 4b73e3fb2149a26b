from pathlib import Path

import platformdirs

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
