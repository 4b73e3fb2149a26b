"""A real Dask scheduler and workers as subprocesses on 127.0.0.1, torn down by PID."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
DASK = str(Path(sys.executable).with_name("dask"))


@dataclass
class DaskProcesses:
    """A running scheduler and its workers (each ``dask worker`` its own process group)."""

    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    # Test specs live in tests/support: scheduler and workers must import them by name.
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    return env


def _wait_for_file(path: Path, process: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dask scheduler exited with code {process.returncode}")
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise TimeoutError(f"dask scheduler did not write {path} within {timeout} s")


def start_worker(
    cluster: DaskProcesses, scratch: Path, nanny: bool = True, cwd: Path | None = None
) -> subprocess.Popen:
    """Start one ``dask worker`` (1 process, 1 thread) connected to ``cluster``, in ``cwd`` (default: this one)."""
    command = [
        DASK, "worker", cluster.address, "--nworkers", "1", "--nthreads", "1",
        "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "60",
        "--local-directory", str(scratch), "--nanny" if nanny else "--no-nanny",
    ]
    log = open(scratch / f"worker-{len(cluster.workers)}.log", "wb")
    process = subprocess.Popen(command, env=_environment(), stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=cwd)
    log.close()
    cluster.workers.append(process)
    return process


def wait_for_workers(address: str, n: int, timeout: float = 90.0) -> None:
    """Block until the scheduler at ``address`` has exactly ``n`` workers."""
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        deadline = time.monotonic() + timeout
        while len(client.nthreads()) != n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} has {len(client.nthreads())} workers, expected {n}")
            time.sleep(0.05)


def _stop(process: subprocess.Popen, timeout: float) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    try:  # the group: a nanny's worker process may outlive it
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@contextmanager
def dask_cluster(
    scratch: Path, n_workers: int = 2, nanny: bool = True, scheduler_env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[DaskProcesses]:
    """Run ``dask scheduler`` plus ``n_workers`` ``dask worker`` processes on free ports.

    ``cwd`` is the workers' current directory (default: this process's), e.g. one other
    than the driver's, as for workers started elsewhere.

    ``scheduler_env`` adds environment variables for the scheduler (Dask reads its
    config from ``DASK_*`` variables, e.g. ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES``).

    Teardown stops the scheduler first (workers then exit quickly), then each worker,
    with SIGKILL of the process group on timeout.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    scheduler_file = scratch / "scheduler.json"
    log = open(scratch / "scheduler.log", "wb")
    scheduler = subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address",
         "127.0.0.1:0", "--scheduler-file", str(scheduler_file)],
        env=_environment(scheduler_env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    log.close()
    cluster = DaskProcesses(address="", scheduler=scheduler)
    try:
        cluster.address = _wait_for_file(scheduler_file, scheduler, timeout=30)["address"]
        for _ in range(n_workers):
            start_worker(cluster, scratch, nanny=nanny, cwd=cwd)
        wait_for_workers(cluster.address, n_workers)
        yield cluster
    finally:
        _stop(scheduler, timeout=5)
        for worker in cluster.workers:
            _stop(worker, timeout=5)
