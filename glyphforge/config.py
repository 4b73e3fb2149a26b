"""Where glyphforge keeps its files, and the environment variables it reads.

Everything that resolves a directory or reads a ``GLYPHFORGE_*`` variable lives
here, so the rules are in one place:

* data dir: the explicit ``data_dir`` argument, else ``$GLYPHFORGE_DATA_DIR``,
  else platformdirs' user data dir for ``glyphforge``;
* ``<data dir>/raw/<dataset>/``: downloaded (or hand-placed) upstream files;
* ``<data dir>/cache/``: the content-addressed store of converted data.
"""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from glyphforge._checks import PathLike

ENV_DATA_DIR = "GLYPHFORGE_DATA_DIR"
ENV_MIRROR = "GLYPHFORGE_MIRROR"
ENV_OFFLINE = "GLYPHFORGE_OFFLINE"

_TRUE_WORDS = {"1", "true", "yes", "on"}


def data_dir(data_dir: PathLike | None = None) -> Path:
    """Return the data directory (not created).

    Parameters
    ----------
    data_dir
        An explicit directory; wins over the environment and the default.

    Returns
    -------
    Path
        ``data_dir``, else ``$GLYPHFORGE_DATA_DIR``, else the platform's user
        data directory for glyphforge, with ``~`` expanded.
    """
    if data_dir is not None:
        chosen: PathLike = data_dir
    elif os.environ.get(ENV_DATA_DIR):
        chosen = os.environ[ENV_DATA_DIR]
    else:
        chosen = platformdirs.user_data_dir("glyphforge", appauthor=False)
    return Path(chosen).expanduser()


def raw_dir(dataset: str, data_dir_: PathLike | None = None) -> Path:
    """Return ``<data dir>/raw/<dataset>``, where upstream files of ``dataset`` live."""
    return data_dir(data_dir_) / "raw" / dataset


def cache_dir(data_dir_: PathLike | None = None) -> Path:
    """Return ``<data dir>/cache``, the root of the cache store."""
    return data_dir(data_dir_) / "cache"


def mirrors_from_env() -> tuple[str, ...]:
    """Return the mirror base URLs listed (space-separated) in ``$GLYPHFORGE_MIRROR``."""
    return tuple(os.environ.get(ENV_MIRROR, "").split())


def offline_from_env() -> bool:
    """Return True when ``$GLYPHFORGE_OFFLINE`` forbids network access."""
    return os.environ.get(ENV_OFFLINE, "").strip().lower() in _TRUE_WORDS
