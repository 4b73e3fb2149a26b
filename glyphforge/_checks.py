"""Argument checks shared by every layer: one copy of each rule and of its error message.

Each check returns the normalised value (plain ``int``, ``float`` or tuples) or raises
a ``ValueError`` that names the argument, shows what was given and says what to give.
This module imports nothing from glyphforge, so anything may use it.
"""
from __future__ import annotations

import math
import numbers
import os
from typing import Any, Union

PathLike = Union[str, "os.PathLike[str]"]
"""A file system path: a string or an ``os.PathLike``."""

#: Threads a loader uses at most to read cache files in parallel.
MAX_READ_THREADS = 4


def is_integer(value: Any) -> bool:
    """Return True for ints and numpy integers, False for bools and everything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer within ``[minimum, maximum]``, else raise.

    Bools are refused (``True`` is not a count).
    """
    within = (minimum is None or value >= minimum) if is_integer(value) else False
    within = within and (maximum is None or value <= maximum)
    if not within:
        bounds = " and ".join(
            text for text in (
                None if minimum is None else f">= {minimum}", None if maximum is None else f"<= {maximum}"
            ) if text
        )
        raise ValueError(f"{name} must be an integer{' ' + bounds if bounds else ''}, got {value!r}")
    return int(value)


def check_real(name: str, value: Any, low: float, high: float, *, high_inclusive: bool = True) -> float:
    """Return ``value`` as a float if it is a real number in ``[low, high]`` (or ``[low, high)``), else raise."""
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    inside = math.isfinite(number) and low <= number and (number <= high if high_inclusive else number < high)
    if not inside:
        interval = f"[{low:g}, {high:g}{']' if high_inclusive else ')'}"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


#: The longest image side a shape made from arguments may have (a 4096x4096 RGB image is 50 MB).
MAX_SIDE = 4096


def check_shape(value: Any, name: str = "shape", maximum: int = MAX_SIDE) -> tuple[int, int]:
    """Return ``value`` as ``(height, width)`` of positive ints, or raise saying how to write it.

    A side beyond ``maximum`` (`MAX_SIDE`: every shape a user gives) is refused, naming the
    memory one such image would take, before anything allocates it.
    """
    try:
        sides = tuple(value)
    except TypeError:
        sides = ()
    if len(sides) != 2 or not all(is_integer(side) and side >= 1 for side in sides):
        raise ValueError(f"{name} {value!r} is invalid: give (height, width) as two positive integers, e.g. (28, 28)")
    height, width = int(sides[0]), int(sides[1])
    if max(height, width) > maximum:
        colour_bytes = 3 * height * width
        size = f"{colour_bytes / 1e9:,.1f} GB" if colour_bytes >= 1e9 else f"{colour_bytes / 1e6:,.1f} MB"
        raise ValueError(
            f"{name} {height}x{width} is too large: each side may be at most {maximum:,} pixels (one such "
            f"colour image takes {size}, and a batch holds thousands); give a smaller {name}"
        )
    return height, width


def check_example_range(value: Any, name: str = "example_range") -> tuple[float, float] | None:
    """Return ``value`` as ``(a, b)`` with ``0 <= a < b <= 1`` (None passes), or raise."""
    if value is None:
        return None
    try:
        low, high = (float(bound) for bound in value)
    except (TypeError, ValueError):
        low, high = 1.0, 0.0
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"{name} {value!r} is invalid: give (a, b) with 0 <= a < b <= 1, e.g. (0.0, 0.9)")
    return low, high


def example_bounds(n: int, example_range: tuple[float, float] | None) -> tuple[int, int]:
    """Return ``(start, stop)``: the part ``[int(a * n), int(b * n))`` of ``n`` examples that ``(a, b)`` selects.

    Adjacent ranges such as ``(0, 0.9)`` and ``(0.9, 1)`` partition the examples exactly,
    whatever ``n``. The same rule holds for every dataset (EMNIST images of a class,
    Omniglot drawers of a character).
    """
    if example_range is None:
        return 0, n
    return int(example_range[0] * n), int(example_range[1] * n)


#: Local workers per CPU beyond which more only compete for cores and memory (and at least this many in all).
WORKERS_PER_CPU, MIN_WORKER_CEILING = 8, 64


def worker_count(requested: int | None, cap: int | None = None) -> int:
    """Return the number of local workers to use: ``requested``, else the CPU count (at most ``cap``).

    Raises
    ------
    ValueError
        ``requested`` is not a positive integer, or more than this machine can run
        usefully (``WORKERS_PER_CPU`` per CPU, at least ``MIN_WORKER_CEILING``).
    """
    available = os.cpu_count() or 1
    if requested is not None:
        ceiling = max(MIN_WORKER_CEILING, WORKERS_PER_CPU * available)
        count = check_int("workers", requested, 1)
        if count > ceiling:
            raise ValueError(
                f"{count:,} local workers is more than this machine can run usefully ({WORKERS_PER_CPU} per CPU, "
                f"at least {MIN_WORKER_CEILING}: {ceiling} for its {available} CPUs); ask for at most {ceiling}, "
                "or run on a cluster session (dask://HOST:PORT, slurm, pbs)"
            )
        return count
    return max(1, available if cap is None else min(cap, available))


def requested_workers(n_workers: Any) -> int:
    """Return the local workers ``n_workers`` asks for (None: the CPU count), or raise (see `worker_count`)."""
    return worker_count(None if n_workers is None else check_int("n_workers", n_workers, 1))


def quote(value: str | bytes | bytearray, limit: int = 200) -> str:
    """Return ``repr(value)`` for an error message, cut to at most ``limit`` characters of it.

    Offending content quoted in errors (a line of a file, a member name) may be huge
    in a hostile file: only the first ``limit`` characters of its ``repr`` are shown,
    followed by how long the whole value is. Short values are exactly their ``repr``.

    Examples
    --------
    >>> quote("7 x")
    "'7 x'"
    >>> quote("abcdefghijklmnop", limit=8)
    "'abcdefg... (16 characters in all)"
    """
    shown = repr(value[:limit])
    if len(value) <= limit and len(shown) <= limit + 14:  # room for the quotes and a bytearray(b'') wrapper
        return shown
    unit = "characters" if isinstance(value, str) else "bytes"
    return f"{shown[:limit]}... ({len(value):,} {unit} in all)"
