"""Run the installed console scripts (``prepare-data``, ``glyphforge``) as real subprocesses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run(command: str, *argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run an installed console script; return its completed process (text output)."""
    script = BIN / command
    if not script.exists():
        pytest.fail(f"{script} is not installed: run pip install -e \".[test,lint,cluster]\" first")
    return subprocess.run([str(script), *map(str, argv)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
