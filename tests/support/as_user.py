"""Run real commands as other users of one group, for tests of a data dir that group shares.

`run_as` runs a command as uid `USER_A` or `USER_B` (no entry in /etc/passwd needed), group
`GROUP` only, with a given umask, through util-linux's ``setpriv``. That needs root, as CI
runs; `skip_reason` says why it cannot run here otherwise.

This interpreter may be installed where other users cannot reach it (pyenv under
``/root``, mode 0700). Then each command runs in a private mount namespace (``unshare
--mount``) in which a tmpfs of mode 0755 covers the closed folder and only the
interpreter's install, this venv and this checkout are bound back in: nothing changes
outside that namespace, and the command sees the real files.
"""
from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

GROUP = 3000
USER_A = 2001
USER_B = 2002
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _closed_folder(path: Path) -> Path | None:
    """The outermost folder on the way to ``path`` that other users may not enter, or None."""
    for folder in (*reversed(path.parents), path):
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


def _uncovering() -> str:
    """Shell commands making this interpreter, venv and checkout reachable in a private mount namespace ("": none)."""
    steps = []
    for index, path in enumerate(sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), PROJECT_ROOT})):
        closed = _closed_folder(path)
        if closed is None:
            continue
        if closed == path:
            raise RuntimeError(f"{path} itself is closed to other users: make it world-readable to run these tests")
        held = f"/tmp/.glyphforge-as-user-{os.getpid()}-{index}"
        steps.append((closed, path, held))
    if not steps:
        return ""
    script = [f"mkdir -p {shlex.quote(held)} && mount --bind {shlex.quote(str(path))} {shlex.quote(held)}"
              for _, path, held in steps]
    script += [f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(closed))}" for closed in {c for c, _, _ in steps}]
    script += [f"mkdir -p {shlex.quote(str(path))} && mount --move {shlex.quote(held)} {shlex.quote(str(path))} && "
               f"rmdir {shlex.quote(held)}" for _, path, held in steps]
    return " && ".join(script)


def run_as(
    uid: int, argv: Sequence[str | Path], *, home: Path, umask: int = 0o002, env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``uid`` of group `GROUP` with ``umask``, in ``home`` (also $HOME and the XDG cache); return it.

    The environment is this one's plus ``env``; text output is captured.
    """
    inner = ["setpriv", f"--reuid={uid}", f"--regid={GROUP}", f"--groups={GROUP}", "--",
             "sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *map(str, argv)]
    uncover = _uncovering()
    command = (["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{uncover} && exec "$@"', "sh", *inner]
               if uncover else inner)
    environment = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, cwd=home)


def skip_reason(home: Path) -> str | None:
    """Why commands cannot run as other users here (None: they can); ``home`` is a folder they may use."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "runs commands as two other uids, which needs root (CI runs as root)"
    missing = [tool for tool in ("setpriv", "unshare") if shutil.which(tool) is None]
    if missing:
        return f"needs util-linux's {' and '.join(missing)} to run commands as other uids"
    probe = run_as(USER_A, [sys.executable, "-c", "import glyphforge"], home=home, timeout=120)
    if probe.returncode:
        return f"cannot run this interpreter as uid {USER_A}: {probe.stderr.strip() or probe.returncode}"
    return None
