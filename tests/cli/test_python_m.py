"""``python -m glyphforge`` is the ``glyphforge`` command: the same output and exit statuses, as real processes."""
from __future__ import annotations

import subprocess
import sys

import pytest

from support.cli import run


@pytest.mark.parametrize(("argv", "status"), [
    (["--help"], 0),
    (["build", "scenes", "--n-examples", "many"], 2),  # a bad argument: usage and exit status 2, before any work
])
def test_python_m_glyphforge_runs_the_glyphforge_command(argv, status):
    module = subprocess.run([sys.executable, "-m", "glyphforge", *argv], capture_output=True, text=True, timeout=300)
    script = run("glyphforge", *argv)
    assert module.returncode == script.returncode == status, module.stderr
    assert (module.stdout, module.stderr) == (script.stdout, script.stderr)
    assert (module.stdout if status == 0 else module.stderr).startswith("usage: glyphforge ")
