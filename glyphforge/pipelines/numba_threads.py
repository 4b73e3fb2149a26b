"""How glyphforge's parallel numba kernels share the cores: idle OpenMP threads sleep.

numba's parallel kernels run on its OpenMP thread pool here (its default layer when TBB
is absent). By default GNU OpenMP threads spin while waiting for work; when another
process holds a core, a kernel then waits on a thread that is not running: measured on
2 cores, batches of 512 glyphs ran up to 40x slower with one core busy. Passive waiting
avoids that for about 20% on mid-size batches when the machine is idle. Batches too small
to be worth waking the pool run on the calling thread (see `glyphforge.resize`).

OpenMP reads ``OMP_WAIT_POLICY`` once, when numba first starts its pool, so importing a
glyphforge kernel module is early enough; a value set by the user is kept.
"""
from __future__ import annotations

import os


def prefer_passive_waiting() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already chooses a policy."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
