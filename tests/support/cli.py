"""Run the console scripts (``prepare-data``, ``glyphforge``): as subprocesses (`run`) or in this process (`run_here`).

`run_here` is for tests of what a command does and says (a subprocess costs a second or two of
interpreter start and imports on a loaded machine); `run` for tests of the process itself (its
exit at shutdown, a signal, another working directory's imports). Each command's exit status
keeps at least one test through `run`.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def script(command: str) -> Path:
    """The installed console script ``command`` (fails the test if it is not installed)."""
    path = BIN / command
    if not path.exists():
        pytest.fail(f"{path} is not installed: run pip install -e \".[test,lint,cluster]\" first")
    return path


def run(command: str, *argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run an installed console script; return its completed process (text output)."""
    return subprocess.run([str(script(command)), *map(str, argv)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _entry_point(command: str) -> Callable[[Sequence[str]], int]:
    from glyphforge import cli

    entry_points: dict[str, Callable[[Sequence[str]], int]] = {"glyphforge": cli.main,
                                                                "prepare-data": cli.prepare_data_main}
    if command not in entry_points:
        pytest.fail(f"no console script {command!r}: give one of {sorted(entry_points)}")
    return entry_points[command]


@contextlib.contextmanager
def _process_like(env: dict[str, str] | None, cwd: str | Path | None) -> Iterator[None]:
    """The environment and working directory of the call, and a console script's warning filters, restored after."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    os.environ.setdefault("COLUMNS", "80")  # a script's output is a pipe, not this terminal: argparse's width
    if cwd is not None:
        os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            # Python's filters outside pytest (which records warnings instead of printing them)
            warnings.resetwarnings()
            for action, category in [("ignore", DeprecationWarning), ("ignore", PendingDeprecationWarning),
                                     ("ignore", ImportWarning), ("ignore", ResourceWarning)]:
                warnings.simplefilter(action, category)  # type: ignore[arg-type]
            warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: \
                sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_here(command: str, *argv: str | Path, env: dict[str, str] | None = None,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a console script's entry point in this process, as `run` runs the script; return what `run` returns.

    The exit status is what the script would exit with: the entry point's return value, a `SystemExit`'s
    code (argparse's 2), or 1 with the traceback on stderr for an exception it lets out. Output goes
    through ``sys.stdout`` and ``sys.stderr`` (glyphforge's log handler and progress bars included);
    "Exception ignored" reports of objects finalized during the call are written to stderr, as a
    process prints them. ``env`` reaches what reads the environment during the call, but not a
    filesystem fsspec made and cached before it (credentials, endpoints): give those to `run`.
    """
    main = _entry_point(command)
    args = [str(arg) for arg in argv]
    stdout, stderr = io.StringIO(), io.StringIO()

    def unraisable(report: sys.UnraisableHookArgs) -> None:
        stderr.write(f"Exception ignored in: {report.object!r}\n")
        traceback.print_exception(report.exc_type, report.exc_value, report.exc_traceback, file=stderr)

    saved_hook = sys.unraisablehook
    with _process_like(env, cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        sys.unraisablehook = unraisable
        try:
            status: object = main(args)
        except SystemExit as exit_:
            status = exit_.code
        except Exception:
            traceback.print_exc()
            status = 1
        finally:
            sys.unraisablehook = saved_hook
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): printed, exit status 1
        stderr.write(f"{status}\n")
        code = 1
    return subprocess.CompletedProcess([command, *args], code, stdout.getvalue(), stderr.getvalue())
