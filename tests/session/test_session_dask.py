"""The dask session against a real scheduler and two worker processes on 127.0.0.1."""
from __future__ import annotations

import os

import pytest

from glyphforge.session import TaskError, WorkerDiedError, open_session

from support.dask_cluster import dask_cluster, wait_for_workers
from support.dask_tasks import fail_on_two, kill_my_worker, square_with_pid
from support.waits import wait_until

pytestmark = [pytest.mark.dask, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # One failure allowed: a task that kills its worker is given up after two deaths.
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"}
    with dask_cluster(tmp_path_factory.mktemp("dask"), n_workers=2, scheduler_env=env) as processes:
        yield processes


@pytest.fixture
def session(cluster):
    wait_for_workers(cluster.address, 2)  # a previous test may have killed one
    with open_session(cluster.address.replace("tcp://", "dask://")) as opened:
        yield opened


def test_map_runs_every_task_on_the_workers(session):
    assert session.kind == "dask" and session.n_workers == 2
    results = dict(session.map(square_with_pid, range(30)))
    assert {index: value for index, (value, _) in results.items()} == {i: i * i for i in range(30)}
    worker_pids = set(session.client.run(os.getpid).values())
    assert {pid for _, pid in results.values()} <= worker_pids and os.getpid() not in worker_pids


def test_closures_and_local_classes_travel_to_the_workers(session):
    base = 100

    class AddBase:
        def __call__(self, x):
            return x + base

    assert sorted(session.map(AddBase(), [1, 2, 3])) == [(0, 101), (1, 102), (2, 103)]


def test_a_raising_task_reports_its_index_and_the_worker_traceback(session):
    with pytest.raises(TaskError) as error:
        list(session.map(fail_on_two, [0, 1, 2, 3]))
    assert error.value.index == 2
    assert "in fail_on_two" in error.value.traceback_text
    assert error.value.traceback_text.rstrip().endswith("KeyError: 'no entry for 2'")


def test_an_abandoned_map_cancels_its_remaining_tasks(session):
    results = session.map(square_with_pid, range(200))
    next(results)
    results.close()
    wait_until(lambda: not session.client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)),
               "the scheduler to forget the abandoned tasks", timeout=60)


def test_a_task_that_kills_every_worker_fails_with_worker_died(session):
    with pytest.raises(WorkerDiedError) as error:
        list(session.map(kill_my_worker, ["boom"]))
    assert error.value.index == 0
    assert str(error.value).startswith("task 0: its worker died every time the task ran (Attempted to run task")


def test_an_owned_local_cluster_is_closed_with_the_session():
    with open_session("dask", n_workers=2, processes=True) as session:
        assert session.n_workers == 2
        assert sorted(session.map(abs, [-3, -4])) == [(0, 3), (1, 4)]
        worker_pids = list(session.client.run(os.getpid).values())
    assert len(worker_pids) == 2
    for pid in worker_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_an_address_excludes_local_cluster_options(cluster):
    with pytest.raises(ValueError, match="n_workers and LocalCluster options only apply when the session starts"):
        open_session("dask", address=cluster.address, n_workers=2)
