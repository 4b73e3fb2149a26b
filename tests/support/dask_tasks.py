"""Tasks the Dask session tests send to workers: importable there (workers get ``tests/`` on their path)."""
from __future__ import annotations

import os
import signal
import time


def square_with_pid(x: int) -> tuple[int, int]:
    """``x * x`` and the worker's pid."""
    time.sleep(0.01)
    return x * x, os.getpid()


def fail_on_two(x: int) -> int:
    """``x``, but a KeyError for 2."""
    if x == 2:
        raise KeyError(f"no entry for {x}")
    return x


def kill_my_worker(x: int) -> None:
    """Kill the worker running this task."""
    os.kill(os.getpid(), signal.SIGKILL)
