"""`support.cli.run_here` (a console script's entry point in the test process) answers as the real process does.

Many tests run the CLI in their own process to save a process start each; this checks, command
by command, that the exit status, stdout and stderr are the real script's, word for word: a
success, a failure (exit 1), a bad argument found by argparse and one found by glyphforge (exit 2).
"""
from __future__ import annotations

import pytest

from support.cli import run, run_here

CASES = {
    "success": ["glyphforge", "info", "--data-dir", "DATA"],
    "--help": ["prepare-data", "--help"],
    "failure": ["prepare-data", "omniglot", "--omniglot-sets", "small1", "--offline", "--data-dir", "DATA"],
    "argparse's refusal": ["prepare-data", "cifar10", "--data-dir", "DATA"],
    "glyphforge's refusal": ["glyphforge", "cache", "rm", "nosuchkey", "--data-dir", "DATA"],
}


@pytest.mark.parametrize("case", CASES)
def test_run_here_answers_as_the_real_process(case, tmp_path):
    argv = [str(tmp_path / "data") if arg == "DATA" else arg for arg in CASES[case]]
    real = run(*argv)
    here = run_here(*argv)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode == {"success": 0, "--help": 0, "failure": 1}.get(case, 2), real.stderr
