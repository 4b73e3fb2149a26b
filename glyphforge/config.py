"""Where glyphforge keeps its files, and the environment variables it reads.

Everything that resolves a directory or reads a ``GLYPHFORGE_*`` variable lives
here, so the rules are in one place:

* data dir: the explicit ``data_dir`` argument, else ``$GLYPHFORGE_DATA_DIR``,
  else platformdirs' user data dir for ``glyphforge``; made absolute here, once, so a
  relative one means the same directory wherever its paths travel (pickled datasets and
  streams, shard tasks on workers started in another directory); a ``file://`` URL is the
  path it names (`glyphforge.urls.file_path`);
* ``<data dir>/raw/<dataset>/``: downloaded (or hand-placed) upstream files;
* ``<data dir>/cache/``: the content-addressed store of converted data;
* the local cache of data read from URLs (`local_cache_dir`): the explicit ``cache_dir``,
  else ``$GLYPHFORGE_CACHE_DIR``, else platformdirs' user cache dir for ``glyphforge``;
  a data dir that is a URL (``s3://...``) is never taken for a path (`data_dir` refuses it);
* the wait for a cache entry or a download another process is making: the explicit
  ``lock_timeout``, else ``$GLYPHFORGE_LOCK_TIMEOUT`` (seconds), else an hour;
* the mirrors (`mirror_setting`): those given, then ``$GLYPHFORGE_MIRROR``'s; offline mode
  (`offline_setting`): ``offline``, else ``$GLYPHFORGE_OFFLINE``;
* the sizes: ``decoded_budget=``, else ``$GLYPHFORGE_DECODED_BUDGET`` (automatic decoded copies:
  `decoded_budget_setting`), and ``$GLYPHFORGE_CACHE_SIZE`` (the local shard cache: `cache_size_setting`).

No other module reads the environment for these (``tests/test_environment.py`` checks it): what needs
a setting calls its function here with what it was given.
"""
from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable
from pathlib import Path

import platformdirs

from glyphforge._checks import PathLike
from glyphforge.textfmt import parse_size
from glyphforge.urls import UnsupportedURLError, check_url, file_path, is_url

ENV_DATA_DIR = "GLYPHFORGE_DATA_DIR"
ENV_MIRROR = "GLYPHFORGE_MIRROR"
ENV_OFFLINE = "GLYPHFORGE_OFFLINE"
ENV_LOCK_TIMEOUT = "GLYPHFORGE_LOCK_TIMEOUT"
ENV_CACHE_DIR = "GLYPHFORGE_CACHE_DIR"
#: The budget of automatic decoded copies (`glyphforge.builds.decoded_copy.source`).
ENV_DECODED_BUDGET = "GLYPHFORGE_DECODED_BUDGET"
#: The size limit of the local shard cache (`glyphforge.storage.shard_cache`).
ENV_CACHE_SIZE = "GLYPHFORGE_CACHE_SIZE"
#: Seconds a process waits for a cache entry or a download that another process is making, unless told otherwise.
DEFAULT_LOCK_TIMEOUT = 3600.0

_TRUE_WORDS = {"1", "true", "yes", "on"}


def data_dir(data_dir: PathLike | None = None) -> Path:
    """Return the data directory (not created), as an absolute path.

    Parameters
    ----------
    data_dir
        An explicit directory; wins over the environment and the default.

    Returns
    -------
    Path
        ``data_dir``, else ``$GLYPHFORGE_DATA_DIR``, else the platform's user
        data directory for glyphforge, with ``~`` expanded; a relative one is taken
        from the current directory now (symbolic links are kept, not resolved).
    """
    chosen: PathLike = data_dir if data_dir is not None else (
        data_dir_setting() or platformdirs.user_data_dir("glyphforge", appauthor=False))
    where = "" if data_dir is not None else f" (from ${ENV_DATA_DIR})"
    place = _local_place(chosen, f"the data dir{where}")
    if place is None:
        raise ValueError(f"the data dir {chosen}{where} is a URL, and this needs a directory on a local or mounted "
                         "filesystem: give a path here (URL data dirs are for glyphforge.DataContext.resolve("
                         "data_dir=URL), and what takes a context)")
    return place.expanduser().absolute()


def _local_place(chosen: PathLike, what: str) -> Path | None:
    """The path ``chosen`` names (a ``file://`` URL's path: `file_path`), None for another URL; ``what`` it is, for
    the error of a URL glyphforge does not take (`check_url`)."""
    if not is_url(chosen):
        return Path(chosen)
    try:
        url = check_url(str(chosen))
    except UnsupportedURLError as error:
        raise type(error)(f"{what}: {error}") from None
    return file_path(url) if url.startswith("file://") else None


def data_dir_on_disk() -> Path | None:
    """The data dir of the environment (or the default) as `data_dir` gives it; None when it is a URL (not file://).

    For what only guards or uses a local data dir when there is one (the export's refusals, a
    place for numba's cache), and must not fail because the data dir lies in object storage.
    """
    text = data_dir_setting() or ""
    try:
        return data_dir() if _local_place(text, "the data dir") is not None else None
    except UnsupportedURLError:  # a URL glyphforge does not take: what reads the data dir says so
        return None


def local_cache_dir(cache_dir: PathLike | None = None) -> Path:
    """Return where data read from URLs is kept on this machine (not created), as an absolute path.

    ``cache_dir``, else ``$GLYPHFORGE_CACHE_DIR``, else the platform's user cache directory for
    glyphforge (e.g. ``~/.cache/glyphforge``): shards and entries fetched from object storage or
    HTTP, keyed by their content, so the second read of anything is local.
    """
    chosen = cache_dir if cache_dir is not None else (
        os.environ.get(ENV_CACHE_DIR) or platformdirs.user_cache_dir("glyphforge", appauthor=False))
    place = _local_place(chosen, "the local cache dir")
    if place is None:
        raise ValueError(f"the local cache dir {chosen} is a URL: it must be a directory on this machine")
    return place.expanduser().absolute()


def raw_dir(dataset: str, data_dir_: PathLike | None = None) -> Path:
    """Return ``<data dir>/raw/<dataset>``, where upstream files of ``dataset`` live."""
    return data_dir(data_dir_) / "raw" / dataset


def cache_dir(data_dir_: PathLike | None = None) -> Path:
    """Return ``<data dir>/cache``, the root of the cache store."""
    return data_dir(data_dir_) / "cache"


def mirror_setting(given: Iterable[str] = ()) -> tuple[str, ...]:
    """Return the mirror bases: ``given``, then those listed (space-separated) in ``$GLYPHFORGE_MIRROR``, without
    repeats."""
    return tuple(dict.fromkeys([*given, *os.environ.get(ENV_MIRROR, "").split()]))


def offline_setting(given: bool | None = None) -> bool:
    """Return ``given``, else whether ``$GLYPHFORGE_OFFLINE`` forbids network access."""
    if given is not None:
        return given
    return os.environ.get(ENV_OFFLINE, "").strip().lower() in _TRUE_WORDS


def data_dir_setting(given: PathLike | None = None) -> PathLike | None:
    """The data dir as set: ``given``, else ``$GLYPHFORGE_DATA_DIR`` as written (a path or a URL); None when neither
    is (the user data dir)."""
    return given if given is not None else (os.environ.get(ENV_DATA_DIR) or None)


def decoded_budget_setting(given: int | str | None = None) -> tuple[int, str] | None:
    """The budget of automatic decoded copies set by ``given`` (``decoded_budget=``), else by
    ``$GLYPHFORGE_DECODED_BUDGET``, with where it comes from; None: neither (the copy's own default).

    Raises
    ------
    ValueError
        Either is not a size (see `glyphforge.textfmt.parse_size`).
    """
    if given is not None:
        try:
            return parse_size(given), f"decoded_budget={given!r}"
        except ValueError as error:
            raise ValueError(f"decoded_budget: {error}") from None
    budget = _size_from_env(ENV_DECODED_BUDGET)
    return None if budget is None else (budget[0], f"${ENV_DECODED_BUDGET}={budget[1]}")


def cache_size_setting() -> int | None:
    """The bytes of ``$GLYPHFORGE_CACHE_SIZE``, the local shard cache's limit; None when it is unset or blank.

    Raises
    ------
    ValueError
        It is not a size; the message names the variable.
    """
    chosen = _size_from_env(ENV_CACHE_SIZE)
    return None if chosen is None else chosen[0]


def _size_from_env(name: str) -> tuple[int, str] | None:
    """The bytes of the size in the variable ``name`` and its text; None when it is unset or blank.

    Raises
    ------
    ValueError
        It is not a size (`glyphforge.textfmt.parse_size`); the message names the variable.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return parse_size(text), text
    except ValueError as error:
        raise ValueError(f"${name}: {error}") from None


def lock_timeout(seconds: float | None = None) -> float:
    """Return how many seconds to wait for a lock held by another process (see `glyphforge.cache.locks`).

    The lock of a cache entry being made, or of a file being downloaded.

    Parameters
    ----------
    seconds
        An explicit timeout; wins over the environment and the default.

    Returns
    -------
    float
        ``seconds``, else ``$GLYPHFORGE_LOCK_TIMEOUT``, else ``DEFAULT_LOCK_TIMEOUT`` (an hour):
        a number >= 0 (0: give up at once; ``inf``: wait for ever).

    Raises
    ------
    ValueError
        When the value is not a number >= 0; the message names where it came from.
    """
    given: object
    if seconds is not None:
        where, given = "lock_timeout", seconds
        real = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool)
        value = _seconds(seconds) if real else math.nan
    elif text := os.environ.get(ENV_LOCK_TIMEOUT, "").strip():
        where, given = f"${ENV_LOCK_TIMEOUT}", text
        value = _seconds(text)
    else:
        return DEFAULT_LOCK_TIMEOUT
    if not value >= 0:
        raise ValueError(
            f"{where} is {given!r}: give the seconds to wait for a cache entry another process is making, a "
            f"number >= 0 such as {DEFAULT_LOCK_TIMEOUT:g} (0: give up at once, inf: wait for ever)"
        )
    return value


def _seconds(given: object) -> float:
    """``given`` (a number, or its text) as seconds; NaN when it is none, or too large for a float but not ``inf``."""
    try:
        value = float(given)  # type: ignore[arg-type]
    except (ValueError, TypeError, OverflowError):  # OverflowError: an int of hundreds of digits
        return math.nan
    if math.isinf(value) and "inf" not in str(given).lower():
        return math.nan  # a number of hundreds of digits read as inf: not the "inf" that means "wait for ever"
    return value
