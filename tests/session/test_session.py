"""Session strings, the local and processes backends, and job scripts (no cluster needed)."""
from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import pytest

from glyphforge.session import (
    SessionError,
    TaskError,
    WorkerDiedError,
    check_session,
    open_session,
    parse_session,
)
from glyphforge.session.jobqueue import job_script


# -- session strings -------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("local", ("local", {})),
        ("processes", ("processes", {})),
        ("processes:8", ("processes", {"n_workers": 8})),
        ("dask", ("dask", {})),
        ("dask:3", ("dask", {"n_workers": 3})),
        ("dask://127.0.0.1:8786", ("dask", {"address": "tcp://127.0.0.1:8786"})),
        ("tcp://10.0.0.5:8786", ("dask", {"address": "tcp://10.0.0.5:8786"})),
        ("tls://head:8786", ("dask", {"address": "tls://head:8786"})),
        ("slurm", ("slurm", {})),
        ("slurm:4", ("slurm", {"jobs": 4})),
        ("PBS:2", ("pbs", {"jobs": 2})),
    ],
)
def test_parse_session_forms(text, expected):
    assert parse_session(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("threads:4", "unknown session 'threads:4'; use one of: local, processes[:N_WORKERS], dask[:N_WORKERS]"),
        ("local:2", "unknown session 'local:2'"),
        ("processes:0", "session 'processes:0': the number after processes: must be a positive integer (n_workers)"),
        ("slurm:x", "session 'slurm:x': the number after slurm: must be a positive integer (jobs), e.g. slurm:4"),
        ("dask://", "session 'dask://' has no host: write e.g. dask://127.0.0.1:8786"),
    ],
)
def test_parse_session_rejects_bad_strings(text, message):
    with pytest.raises(ValueError) as error:
        parse_session(text)
    assert str(error.value).startswith(message)


def test_open_session_refuses_contradicting_options():
    with pytest.raises(ValueError, match=r"session 'processes:2' sets n_workers=2, which the options set differently "
                                         r"\(n_workers=3\)"):
        open_session("processes:2", n_workers=3)


def test_open_session_names_an_unknown_option():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_worker'"):
        open_session("processes", n_worker=2)


@pytest.mark.parametrize(
    ("session", "other_systems", "own"),
    [("slurm:2", {"resource_spec": "select=1:ncpus=4"}, {"job_mem": "4GB", "queue": "gpu"}),
     ("pbs", {"job_mem": "4GB"}, {"resource_spec": "select=1:ncpus=4", "queue": "gpu"})],
)
def test_a_batch_session_refuses_the_other_systems_keywords_before_any_job(session, other_systems, own):
    name, checked = check_session(session, own)  # its own keywords pass
    assert checked == {**parse_session(session)[1], **own}
    with pytest.raises(TypeError) as error:
        check_session(session, {**own, **other_systems})
    message = str(error.value)
    (keyword,) = other_systems
    assert message.startswith(f"session {session!r} got an unexpected keyword argument {keyword!r}")
    accepted = message.split(": it takes ", 1)[1].split(". ")[0].split(", ")
    assert {*own, "cores", "memory", "jobs", "walltime", "account"} <= set(accepted)
    assert keyword not in accepted and "system" not in accepted


# -- local -----------------------------------------------------------------
def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x * 10


def test_local_session_runs_in_order_and_chains_the_original_error():
    with open_session() as session:
        assert session.kind == "local" and session.n_workers == 1
        results = session.map(_fail_on_three, [0, 1, 2, 3, 4])
        assert [next(results), next(results), next(results)] == [(0, 0), (1, 10), (2, 20)]
        with pytest.raises(TaskError) as error:
            next(results)
    assert error.value.index == 3
    assert isinstance(error.value.__cause__, ValueError)
    assert 'raise ValueError("three is not allowed")' in error.value.traceback_text
    assert str(error.value).startswith("task 3: it raised an exception; the traceback from its worker:\nTraceback")


def test_a_closed_session_refuses_work():
    session = open_session("local")
    session.close()
    session.close()  # idempotent
    with pytest.raises(SessionError, match="this 'local' session is closed; open a new one"):
        session.map(abs, [1])


# -- processes ---------------------------------------------------------------
@pytest.fixture(scope="module")
def processes():
    with open_session("processes:2") as session:
        yield session


def test_processes_run_closures_and_local_classes_in_other_processes(processes):
    offset = 7

    class Scaler:  # defined here: only dill (by value) can send it
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, x):
            return (os.getpid(), x * self.factor + offset)

    results = dict(processes.map(Scaler(3), range(20)))
    assert sorted(results) == list(range(20))
    assert [value for _, value in (results[i] for i in range(20))] == [3 * i + 7 for i in range(20)]
    pids = {pid for pid, _ in results.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_processes_report_the_failing_index_and_traceback(processes):
    with pytest.raises(TaskError) as error:
        list(processes.map(_fail_on_three, [5, 6, 3, 8]))
    assert error.value.index == 2
    assert "in _fail_on_three" in error.value.traceback_text
    assert error.value.traceback_text.rstrip().endswith("ValueError: three is not allowed")
    # the session is still usable, and a late result of the abandoned map never leaks
    assert sorted(processes.map(abs, [-1, -2])) == [(0, 1), (1, 2)]


def _die_once(marker_dir: Path, x: int) -> tuple[int, int]:
    marker = marker_dir / f"died-{x}"
    if x in (1, 4) and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return x, os.getpid()


def test_processes_retry_a_task_whose_worker_died(processes, tmp_path):
    results = dict(processes.map(functools.partial(_die_once, tmp_path), range(6)))
    assert {index: value[0] for index, value in results.items()} == {i: i for i in range(6)}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["died-1", "died-4"]
    assert processes.n_workers == 2


def _always_die(x: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_processes_give_up_after_max_retries():
    with open_session("processes", n_workers=1, max_retries=1) as session:
        with pytest.raises(WorkerDiedError) as error:
            list(session.map(_always_die, ["a"]))
        assert error.value.index == 0
        assert str(error.value).startswith(
            "task 0: its worker died every time the task ran (2 attempts; last exit: SIGKILL)"
        )
        assert list(session.map(abs, [-5])) == [(0, 5)]


def test_processes_close_stops_every_worker():
    session = open_session("processes:2")
    pids = [worker.process.pid for worker in session._workers]
    session.close()
    for pid in pids:  # stopped and reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(ValueError, match="n_workers must be an integer >= 1, got 0"):
        open_session("processes", n_workers=0)


# -- batch job scripts (dask-jobqueue renders them; nothing is submitted) ----
def test_slurm_job_script_carries_the_requested_resources():
    script = job_script(
        "slurm", cores=2, memory="3GB", processes=1, walltime="01:30:00", queue="gpu",
        job_extra_directives=["--exclusive"], job_script_prologue=["module load python"],
        python="/opt/venv/bin/python",
    )
    lines = script.splitlines()
    for expected in ("#SBATCH -p gpu", "#SBATCH --cpus-per-task=2", "#SBATCH --mem=3G",
                     "#SBATCH -t 01:30:00", "#SBATCH --exclusive", "module load python"):
        assert expected in lines
    worker = lines[-1]
    assert worker.startswith("/opt/venv/bin/python -m distributed.cli.dask_worker tcp://")
    assert "--nthreads 2" in worker and "--nanny" in worker


def test_pbs_job_script_and_unknown_system():
    script = job_script("pbs", cores=4, memory="8GB", processes=2, account="proj42")
    assert "#PBS -A proj42" in script.splitlines()
    assert "#PBS -l select=1:ncpus=4:mem=" in script
    assert "--nthreads 2 " in script and "--nworkers 2 " in script
    with pytest.raises(ValueError, match="unknown batch system 'lsf'; use one of slurm, pbs"):
        job_script("lsf")
