"""Where numba keeps glyphforge's compiled kernels, so that the first compile is the only one.

numba caches a kernel next to its source (``__pycache__``) when that directory is
writable, else in ``~/.cache/numba``. A shared, read-only install (site-packages on a
cluster, a container image) whose user has no writable home then recompiles every
kernel in every process: 3-9 s each. `configure` runs before the kernels are defined
(their modules call it first) and, unless the user chose ``$NUMBA_CACHE_DIR``, picks the
first writable of:

1. the package's own ``__pycache__`` (numba's default);
2. the per-user cache dir, ``platformdirs.user_cache_dir("glyphforge")/numba``;
3. ``<data dir>/numba-cache`` (writable wherever glyphforge works; on a cluster a
   shared data dir lets every node of one CPU type reuse one compile).

numba itself passes over a ``$NUMBA_CACHE_DIR`` it cannot write to (then the package's
``__pycache__``, then ``~/.cache/numba``): `glyphforge.warmup.kernel_cache` asks a kernel where its cache really is.

Processes of one machine share that directory, so a session's workers load what the
driver (or ``glyphforge warmup``) compiled. numba keys its cache files by CPU and
signature, so sharing one directory between different machines is safe.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numba
import platformdirs

from glyphforge import config

PACKAGE_CACHE = Path(__file__).resolve().parent / "__pycache__"
#: ``njit`` options of a kernel Python calls: numba makes no C-callable wrapper (nobody calls one),
#: which is machine code less to compile on first use.
ENTRY: dict[str, Any] = {"no_cfunc_wrapper": True}
#: ``njit`` options of a function only kernels call: no Python-callable wrapper either.
INNER: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def configure() -> Path | None:
    """Point numba's cache at the first writable candidate (see the module docstring); return it.

    Returns None when ``$NUMBA_CACHE_DIR`` is set (the user's choice is kept) or when the
    package's ``__pycache__`` is writable (numba's default works).
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    if _writable(PACKAGE_CACHE):
        return None
    data_dir = config.data_dir_on_disk()  # None: the data dir is a URL
    for candidate in (Path(platformdirs.user_cache_dir("glyphforge", appauthor=False)) / "numba",
                      None if data_dir is None else data_dir / "numba-cache"):
        if candidate is not None and _writable(candidate):
            numba.config.CACHE_DIR = str(candidate)  # type: ignore[attr-defined]  # set by numba at import, not typed
            os.environ["NUMBA_CACHE_DIR"] = str(candidate)  # and by the processes this one starts
            return candidate
    return None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True
