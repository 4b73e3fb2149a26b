"""Compile every numba kernel glyphforge has, once, so later commands start at full speed.

``glyphforge warmup`` (also run at the end of ``prepare-data``, in well under a second
when already warm) calls each kernel on tiny inputs of the exact types real calls use,
so numba compiles it, or loads it from its on-disk cache (see
`glyphforge.pipelines.numba_cache`). Cluster images and job prologues run it once; every
later process of that machine (or of every machine sharing the cache dir) loads the
kernels instead of compiling them.

The first time on a machine with more than one CPU, the scene kernels compile in a second
process while this one compiles the resize kernels (numba compiles on one core; the two
groups write apart cache files; font glyphs are not resized by numba). A marker file beside
the compiled kernels, named by a hash of glyphforge's and numba's versions, the kernels'
sources and the CPU, says that this was done: with it, every call runs in this process.
Warmups of one machine take turns (a file lock beside the marker), so job prologues
started together compile once.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock
import numpy as np

from glyphforge import config
from glyphforge.cache.locks import hold
from glyphforge.errors import StorageError

_log = logging.getLogger(__name__)

#: What `warmup` compiles: ``(name, what it serves, group)``, one call per kernel
#: specialisation that glyphforge's commands use. Each group's kernels live in their own
#: source file, hence their own numba cache files: two groups may compile at once.
KERNEL_CALLS: tuple[tuple[str, str, str], ...] = (
    ("resize uint8 box/bilinear/lanczos", "uint8 images, Pillow's 8-bit fixed point", "resize"),
    ("resize uint8 area", "uint8 images, exact area sums", "resize"),
    ("resize float32 (every method)", "float32 images", "resize"),
    ("scene layout and compositing", "ScatteredGlyphs shards", "scenes"),
)


def _call(name: str) -> Callable[[], object]:
    from glyphforge.pipelines.resize import resize
    from glyphforge.scenes.spec import ScatteredGlyphs

    grey = np.zeros((1, 4, 4), np.uint8)
    if name == "scene layout and compositing":  # font glyphs are resized by Pillow: no resize kernel here
        scene = ScatteredGlyphs(2, glyphs="font", characters="AB", image_shape=(16, 16), glyph_shape=(6, 6),
                                background_colours=["black"], shard_size=2)
        return lambda: scene.make_shard(0, np.random.default_rng(0), 2)
    calls = {
        "resize uint8 box/bilinear/lanczos": lambda: resize(grey, (2, 2), method="box"),
        "resize uint8 area": lambda: resize(grey, (3, 3), method="area"),
        "resize float32 (every method)": lambda: resize(grey.astype(np.float32), (2, 2), method="box"),
    }
    return calls[name]


def _run_group(group: str) -> list[tuple[str, float]]:
    """Run the calls of one group in order; return ``(kernel, seconds)`` for each."""
    timings = []
    for name, _, in_group in KERNEL_CALLS:
        if in_group == group:
            call = _call(name)
            started = time.perf_counter()
            call()
            timings.append((name, time.perf_counter() - started))
    return timings


def warmup() -> list[tuple[str, float]]:
    """Compile (or load from numba's cache) every glyphforge kernel; return ``(kernel, seconds)`` for each.

    Cold, on several CPUs, the scene kernels compile in a second process meanwhile (module
    docstring); their seconds are that process's.
    """
    marker = _warm_marker()
    with _taking_turns(marker):
        warm = marker is not None and marker.exists()  # (also when another warmup finished meanwhile)
        if warm or (os.cpu_count() or 1) == 1:
            timings = _run_group("resize") + _run_group("scenes")
        else:
            timings = _run_beside("scenes", "resize")
        if marker is not None and not warm:
            with contextlib.suppress(OSError):  # a read-only cache dir: the next run is just not told
                marker.touch()
    names = [name for name, _, _ in KERNEL_CALLS]
    return sorted(timings, key=lambda timing: names.index(timing[0]))


@contextlib.contextmanager
def _taking_turns(marker: Path | None) -> Iterator[None]:
    """Hold the machine's warmup lock (beside ``marker``) while kernels may compile.

    No lock when the marker says they are compiled, or where the lock file cannot be
    written (a read-only cache dir: nothing there can be saved anyway).
    """
    with contextlib.ExitStack() as held:
        if marker is not None and not marker.exists():
            lock = filelock.FileLock(marker.with_name("glyphforge-warmup.lock"))
            with contextlib.suppress(StorageError):
                held.enter_context(hold(lock, "compiling glyphforge's numba kernels", config.lock_timeout()))
        yield


def _run_beside(other: str, own: str) -> list[tuple[str, float]]:
    """Run group ``other`` in a second Python process while this one runs group ``own``.

    A plain subprocess, not multiprocessing, which would import the caller's script again;
    like multiprocessing it gets this process's ``sys.path``, so it imports this same
    glyphforge. If it fails, its group runs here after all.
    """
    code = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); from glyphforge.warmup import _run_group; "
            f"print(json.dumps(_run_group({other!r})))")
    beside = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    timings = _run_group(own)
    output, errors = beside.communicate()
    if beside.returncode == 0:
        return timings + [(name, seconds) for name, seconds in json.loads(output.splitlines()[-1])]
    _log.warning("warmup: the second process failed (exit %s: %s); compiling its kernels here",
                 beside.returncode, (errors.strip().splitlines() or ["no message"])[-1])
    return timings + _run_group(other)


def _warm_marker() -> Path | None:
    """The file that says this machine's kernels were compiled, or None where numba keeps no cache.

    Its name hashes what numba's cache depends on: the kernels' sources, numba's version
    and the CPU (plus glyphforge's version).
    """
    import llvmlite.binding
    import numba

    from glyphforge._version import __version__
    from glyphforge.pipelines import composite, resample_kernel  # the kernels choose the cache dir

    folder = kernel_cache()
    sources = [Path(module.__file__).read_bytes() for module in (resample_kernel, composite) if module.__file__]
    cpu = f"{llvmlite.binding.get_host_cpu_name()} {llvmlite.binding.get_host_cpu_features().flatten()}"
    key = hashlib.sha256(repr((__version__, numba.__version__, cpu, sources)).encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / f"glyphforge-warm-{key}"


def cache_location() -> str:
    """Where numba keeps the compiled kernels, for people.

    Says when that is the package's default, and when it is not the ``$NUMBA_CACHE_DIR``
    the user chose (numba passes over one it cannot write to).
    """
    from glyphforge.pipelines import numba_cache

    folder = kernel_cache()
    if folder == numba_cache.PACKAGE_CACHE:
        return f"{folder} (beside the kernels{_passed_over(folder)})"
    return f"{folder}{_passed_over(folder)}"


def _passed_over(folder: Path) -> str:
    """Words saying that ``$NUMBA_CACHE_DIR`` is set but numba did not use it (``folder`` is elsewhere); or none."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if not chosen or Path(os.path.abspath(folder)).is_relative_to(os.path.abspath(chosen)):
        return ""
    return (f"; not in $NUMBA_CACHE_DIR, {chosen}, which numba cannot write to, so it took the first writable of "
            "the kernels' __pycache__ and ~/.cache/numba")


def kernel_cache() -> Path:
    """The directory that holds glyphforge's compiled kernels (their ``*.nbi`` index files), as numba chose it.

    numba picks it once per kernel, when the kernel is defined: the first directory it can
    write to of ``$NUMBA_CACHE_DIR`` (its ``CACHE_DIR``; a subdirectory named after the
    source folder), the source's ``__pycache__`` and ``~/.cache/numba`` (again a
    subdirectory). A ``$NUMBA_CACHE_DIR`` it cannot write to is passed over without a word,
    so this asks a kernel where its cache is rather than repeating the rule.
    """
    from glyphforge.pipelines import composite  # importing a kernel module makes numba choose

    cache = composite.composite._cache  # numba's FunctionCache
    return Path(cache.cache_path)
