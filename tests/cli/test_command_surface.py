"""The command's surface: ``glyphforge prepare`` is ``prepare-data``, ``--version``, and output into a closed pipe.

Each is checked on real processes of the installed console scripts: a closed pipe is a real
pipe whose reading end the test closes before the command writes anything (what ``| head -1``
does to a longer output), so every write the command makes fails with EPIPE.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from glyphforge import __version__, cli

from support.cli import run, script

#: Each command that writes to stdout, given the arguments that make it write: (console script, arguments).
WRITERS = (
    ("glyphforge", ("cache", "ls")),
    ("glyphforge", ("info",)),
    ("glyphforge", ("prepare", "mnist", "--list")),
    ("prepare-data", ("mnist", "--list")),
)


@pytest.mark.parametrize("command", ["glyphforge", "prepare-data"])
def test_version_prints_the_version(command):
    done = run(command, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"glyphforge {__version__}\n", "")


@pytest.mark.parametrize(("command", "argv"), WRITERS, ids=[" ".join([c, *a]) for c, a in WRITERS])
def test_output_into_a_closed_pipe_ends_quietly_with_status_141(command, argv, tmp_path):
    process = subprocess.Popen([str(script(command)), *argv, "--data-dir", str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "GLYPHFORGE_OFFLINE": "1"})
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader has gone before the first write
    stderr = process.stderr.read().decode()
    assert (process.wait(timeout=300), stderr) == (cli.common.CLOSED_PIPE, "")


def _arguments(parser) -> list[tuple]:
    """What ``parser`` takes: each argument's destination, option strings, default and choices (``--version`` aside)."""
    return [(action.dest, action.option_strings, action.default, action.choices) for action in parser._actions
            if action.dest != "version"]


def test_prepare_takes_what_prepare_data_takes():
    commands = next(action for action in cli._glyphforge_parser()._actions if action.dest == "command")
    prepare = commands.choices["prepare"]
    assert _arguments(prepare) == _arguments(cli.prepare.prepare_parser())
    assert prepare.get_default("action") is cli.prepare.prepare_data
