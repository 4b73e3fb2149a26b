"""Waiting in tests on real evidence (a file, a request, a line), never on a fixed sleep.

The machine running the suite may be loaded (2 cores shared with other work): every wait
here has a generous timeout, and fails at once, saying why, when the process it watches
exits first.
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

#: Seconds any one wait may take before the test fails (far above what a loaded machine needs).
TIMEOUT = 120.0


def wait_until(
    condition: Callable[[], object], what: str, *, process: subprocess.Popen | None = None, timeout: float = TIMEOUT
) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` if ``process`` exits first or ``timeout`` passes.

    Parameters
    ----------
    condition
        Checked every 20 ms.
    what
        The awaited evidence, for the failure message ("the child holds the lock").
    process
        A process that must still be running while we wait; its output (when piped) is
        shown if it exits.
    timeout
        Seconds before the test fails.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            output = process.communicate()
            pytest.fail(f"waiting for {what}: the process exited with {process.returncode} first; its output: "
                        f"{output!r}")
        if time.monotonic() > deadline:
            pytest.fail(f"waiting for {what}: not there after {timeout:g} s")
        time.sleep(0.02)
