"""A console script run in the background: started now, its result taken later (`BackgroundRun`)."""
from __future__ import annotations

import os
import subprocess
import threading
import time

from support.cli import script


class BackgroundRun:
    """Run an installed console script in the background; `result` waits for it, `stop` kills it if still running.

    For a command that mostly waits (a client's own retry sleeps), so the tests beside it run meanwhile.
    The seconds it took are the process's own, measured when it exits, however late `result` is called.
    """

    def __init__(self, command: str, *argv: str, env: dict[str, str] | None = None) -> None:
        self._started = time.monotonic()
        self._process = subprocess.Popen([str(script(command)), *argv], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True,
                                         env={**os.environ, **(env or {})})
        self._took = 0.0
        self._output = ("", "")
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        self._output = self._process.communicate()
        self._took = time.monotonic() - self._started

    def result(self, timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
        """The finished process (text output) and the seconds it ran; fails the test after ``timeout`` seconds."""
        self._waiter.join(timeout)
        if self._waiter.is_alive():
            self.stop()
            raise TimeoutError(f"{self._process.args} still ran after {timeout} s")
        completed = subprocess.CompletedProcess(self._process.args, self._process.returncode, *self._output)
        return completed, self._took

    def stop(self) -> None:
        """Kill the process if it still runs, and wait for it."""
        if self._process.poll() is None:
            self._process.kill()
        self._waiter.join()
