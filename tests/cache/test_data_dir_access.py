"""A data dir this user may not reach (issue 30, row 15), with two real uids running the real commands.

User A (uid 2001) keeps a data dir in a home of mode 0700; user B (uid 2002) points the
commands (``--data-dir``, then ``$GLYPHFORGE_DATA_DIR``) and ``find_built`` at it. Each says
in one paragraph which folder denies access, its owner and mode and what to do: the
commands exit 2 before any work with no traceback, Python raises a ``PermissionError``
(never "none built yet", which would be false). Needs root (see `support.as_user`).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from support.as_user import GROUP, USER_A, USER_B, run_as, skip_reason
from support.cli import BIN

pytestmark = pytest.mark.slow

#: What B's Python prints of ``find_built``: whether the error is a PermissionError, then its message.
FIND = ("import sys; from glyphforge.builds.reading.lookup import find_built\n"
        "try:\n    find_built('scenes', data_dir=sys.argv[1])\n"
        "except Exception as error:\n    print(isinstance(error, PermissionError), type(error).__name__, error)")


@pytest.fixture(scope="module")
def homes():
    """``{uid: home}``: A's home is mode 0700 and holds ``data``, B's is B's own."""
    base = Path(tempfile.mkdtemp(prefix="glyphforge-access-"))  # not under pytest's root-only tmp dir
    try:
        os.chmod(base, 0o755)
        found = {USER_A: base / "home-a", USER_B: base / "home-b"}
        for uid, home in found.items():
            home.mkdir()
            os.chown(home, uid, GROUP)
        reason = skip_reason(found[USER_B])
        if reason:
            pytest.skip(reason)
        (found[USER_A] / "data").mkdir()
        os.chown(found[USER_A] / "data", USER_A, GROUP)
        os.chmod(found[USER_A], 0o700)
        yield found
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_b(homes, *argv: str | Path, env: dict[str, str] | None = None):
    return run_as(USER_B, [str(arg) for arg in argv], home=homes[USER_B], env=env)


def assert_names_the_closed_home(text: str, closed: Path) -> None:
    assert "Traceback" not in text
    assert f"you may not {'read' if closed.name == 'data' else 'enter'} " in text
    assert f"uid {USER_A}" in text and "drwx------" in text
    assert f"chmod g+rx {closed}" in text


COMMANDS = {
    "cache ls": ["glyphforge", "cache", "ls"],
    "info": ["glyphforge", "info"],
    "build": ["glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "5"],
    "export": ["glyphforge", "export", "scenes", "OUT"],
    "prepare-data": ["prepare-data", "mnist", "--offline"],
}


@pytest.mark.parametrize("given", ["--data-dir", "env"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_on_a_data_dir_in_a_closed_home_exits_2_naming_it(homes, command, given):
    data = homes[USER_A] / "data"
    program, *argv = COMMANDS[command]
    argv = [arg if arg != "OUT" else homes[USER_B] / "out" for arg in argv]
    if given == "--data-dir":
        done = as_b(homes, BIN / program, *argv, "--data-dir", data)
    else:
        done = as_b(homes, BIN / program, *argv, env={"GLYPHFORGE_DATA_DIR": str(data)})
    assert done.returncode == 2, done.stderr
    assert f"the data dir {data} cannot be used" in done.stderr
    assert ("$GLYPHFORGE_DATA_DIR: " in done.stderr) == (given == "env")
    assert_names_the_closed_home(done.stderr, homes[USER_A])
    assert done.stdout == "" and sorted(os.listdir(homes[USER_B])) == []  # nothing done, nothing written


def test_a_data_dir_that_is_another_users_closed_folder_is_named_as_unreadable(homes):
    data = homes[USER_A] / "data"
    os.chmod(homes[USER_A], 0o755)
    os.chmod(data, 0o700)
    try:
        done = as_b(homes, BIN / "glyphforge", "cache", "ls", "--data-dir", data)
    finally:
        os.chmod(data, 0o2775)
        os.chmod(homes[USER_A], 0o700)
    assert done.returncode == 2, done.stderr
    assert_names_the_closed_home(done.stderr, data)


def test_find_built_raises_a_permission_error_not_none_built_yet(homes):
    data = homes[USER_A] / "data"
    done = as_b(homes, sys.executable, "-c", FIND, data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True DataDirAccessError the data dir "), done.stdout
    assert "none built yet" not in done.stdout
    assert_names_the_closed_home(done.stdout, homes[USER_A])


def test_the_owner_still_uses_the_data_dir(homes):
    data = homes[USER_A] / "data"
    done = run_as(USER_A, [str(BIN / "glyphforge"), "cache", "ls", "--data-dir", str(data)], home=homes[USER_A])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"the cache at {data / 'cache'} is empty")
