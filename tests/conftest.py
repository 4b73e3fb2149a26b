"""Fixtures shared by the whole suite."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.gcs_server import gcs_server_process  # noqa: F401 (fixture: one emulator for the session)
from support.s3_server import s3_server_process  # noqa: F401 (fixture: one moto server for the session)
from support.skip_count import pytest_terminal_summary  # noqa: F401 (hook: "torch tests skipped: N" at the end)
from support.unreachable_stores import unreachable_listings  # noqa: F401 (fixture: clients' retries, in the background)

# Dask's statistical profiler samples the threads of every worker every 10 ms, which no test reads (13 s of a run
# of the suite); set before dask is imported, and inherited by the workers and commands the tests start.
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels() -> None:
    """Compile every numba kernel into the package's cache once, before any test (``glyphforge warmup``).

    A fresh checkout (CI) has none: without this, each xdist worker and each command a test
    runs in a process of its own compiled what it used first, the same kernels several times.
    The xdist workers take turns (warmup's lock): one compiles, the other loads. The tests
    of compiling itself use caches of their own (``$NUMBA_CACHE_DIR``).
    """
    from glyphforge.warmup import warmup

    warmup()


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory, monkeypatch):
    """Point every test at a fresh data dir and local cache dir, and clear mirror/offline settings.

    No test may touch the user's real data or cache directory or inherit a mirror.
    """
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path_factory.mktemp("data-dir")))
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("local-cache")))
    monkeypatch.delenv("GLYPHFORGE_MIRROR", raising=False)
    monkeypatch.delenv("GLYPHFORGE_OFFLINE", raising=False)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real upstream files in ``../shared/data``; skip when that folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"real upstream files not found at {SHARED_DATA} "
            "(a clone without ../shared/data beside it); CI always has them"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def synthetic_emnist(tmp_path_factory):
    """A small synthetic EMNIST gzip.zip in NIST's layout, with every split (session-wide: tests only read it)."""
    from support.synthetic_emnist import write_synthetic_emnist

    return write_synthetic_emnist(tmp_path_factory.mktemp("emnist") / "gzip.zip")
