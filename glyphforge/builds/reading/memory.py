"""How much ``ds.arrays`` may decode by default (`glyphforge.builds.reading.dataset.BuiltDataset`): half the memory
available now, measured wherever the system tells it."""
from __future__ import annotations

import os

#: The part of the available memory ``ds.arrays`` may fill by default.
ARRAYS_MEMORY_FRACTION = 0.5
#: What ``ds.arrays`` may decode by default where the available memory cannot be measured (Windows): 4 GiB.
FALLBACK_ARRAYS_LIMIT = 4 << 30
#: Where Linux tells the memory available.
MEMINFO = "/proc/meminfo"


def default_arrays_limit() -> int:
    """Half the memory available now, or :data:`FALLBACK_ARRAYS_LIMIT` where that cannot be measured.

    The memory is ``MemAvailable`` of ``/proc/meminfo`` (Linux), else the physical memory
    from ``os.sysconf`` (other Unix systems); Windows has neither.
    """
    available = _available_memory()
    return FALLBACK_ARRAYS_LIMIT if available is None else int(available * ARRAYS_MEMORY_FRACTION)


def _available_memory() -> int | None:
    """``MemAvailable`` in bytes, else the physical memory, else None (neither can be read here)."""
    try:
        with open(MEMINFO, encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    sysconf = getattr(os, "sysconf", None)  # absent on Windows
    try:
        return None if sysconf is None else int(sysconf("SC_PAGE_SIZE") * sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):  # a name this system does not know
        return None
