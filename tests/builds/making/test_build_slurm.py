"""Builds on a real single-node SLURM cluster through ``open_session("slurm", ...)``.

The Dask scheduler of a slurm session must be reachable from the jobs, which run
inside the test cluster's network namespace: each build therefore runs in a child
process started in that namespace (``support.build_child``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from glyphforge.builds import BuiltDataset, build, cache_params
from glyphforge.cache import CacheStore

from support.slurm_cluster import REQUIRE_ENV, slurm_cluster, unavailable_reason
from support.specs import NoiseSpec, holder_of, made_shards, shard_makers
from support.waits import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(180)]

TESTS_DIR = Path(__file__).resolve().parents[2]
#: A child process imports the support modules and this glyphforge (not an installed one).
CHILD_PATH = os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])


def _cannot_run(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but the SLURM test cluster cannot run: {reason}")
    pytest.skip(f"SLURM test cluster unavailable: {reason}")


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason:
        _cannot_run(reason)
    try:
        with slurm_cluster() as cluster:
            yield cluster
    except RuntimeError as error:
        if "SLURM test cluster" not in str(error):
            raise
        _cannot_run(str(error))


def _slurm_build(slurm, tmp_path: Path, spec: dict, data_dir: Path, env: dict | None = None) -> subprocess.Popen:
    """Start a child process that builds NoiseSpec(**spec) on two SLURM jobs."""
    request = tmp_path / "request.json"
    request.write_text(json.dumps({
        "spec": spec,
        "session": "slurm",
        "session_options": {
            "cores": 1, "memory": "1GB", "jobs": 2, "processes": 1, "interface": "lo",
            "python": sys.executable, "log_directory": str(tmp_path / "job-logs"),
            "local_directory": str(tmp_path / "worker-scratch"),
            "scheduler_options": {"dashboard_address": "127.0.0.1:0"}, "no_workers_timeout": 60,
        },
        "data_dir": str(data_dir),
    }))
    env = {**slurm.env, "PYTHONPATH": CHILD_PATH, **(env or {})}  # sbatch passes it on to the jobs
    return subprocess.Popen(slurm.command(sys.executable, "-m", "support.build_child", str(request)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(child: subprocess.Popen) -> str:
    out, err = child.communicate(timeout=150)
    assert child.returncode == 0, f"the SLURM build failed:\n{err[-4000:]}"
    return out.strip()


def _assert_same_as_local(spec: NoiseSpec, data_dir: Path, tmp_path: Path, key: str) -> None:
    entry = CacheStore.for_data_dir(data_dir).get(spec.kind, cache_params(spec))
    assert entry is not None and entry.key == key
    local = build(spec, data_dir=tmp_path / "local", progress=False)
    on_slurm = BuiltDataset(entry)
    assert sorted(on_slurm.arrays) == sorted(local.arrays)
    for name in local.arrays:
        assert on_slurm[name].tobytes() == local[name].tobytes()


def test_a_slurm_build_gives_the_same_bytes_as_local(slurm, tmp_path):
    touch_dir = tmp_path / "made"
    touch_dir.mkdir()
    spec = {"n_examples": 45, "shard_size": 5, "seed": 11, "touch_dir": str(touch_dir)}
    key = _finish(_slurm_build(slurm, tmp_path, spec, tmp_path / "data"))
    _assert_same_as_local(NoiseSpec(n_examples=45, shard_size=5, seed=11), tmp_path / "data", tmp_path, key)
    assert made_shards(touch_dir) == list(range(9))
    # the shards were made by workers in SLURM jobs (whose logs dask-jobqueue directs here)
    makers = [maker for shard in range(9) for maker in shard_makers(touch_dir, shard)]
    assert os.getpid() not in {pid for pid, _ in makers}
    jobs = {job for _, job in makers}
    assert "0" not in jobs and 1 <= len(jobs) <= 2  # the first job up may make them all
    assert len(list((tmp_path / "job-logs").glob("*.err"))) == 2
    assert slurm.run("squeue", "-h").strip() == ""  # closing the session cancelled its jobs


def _scancel_the_holder(slurm, touch_dir: Path, shard: int, cancelled: list[str]) -> None:
    """scancel the SLURM job whose worker holds ``shard`` (``NoiseSpec.hold_shard``) once it holds it."""
    wait_until(lambda: holder_of(touch_dir, shard), f"a worker to hold shard {shard}")
    [(_, job_id)] = shard_makers(touch_dir, shard)
    slurm.run("scancel", job_id)
    cancelled.append(job_id)


@pytest.mark.slow  # 13-18 s: the longest test not marked slow until then
def test_a_slurm_build_survives_scancel_of_a_worker_job_and_replaces_it(slurm, tmp_path):
    touch_dir = tmp_path / "made"
    touch_dir.mkdir()
    spec = {"n_examples": 96, "shard_size": 4, "seed": 6, "delay": 0.3, "touch_dir": str(touch_dir), "hold_shard": 4}
    # Dask declares the cancelled job's worker lost after 1 s (default 15 s); the session
    # then submits a replacement job.
    before = slurm.submitted_ids()
    child = _slurm_build(slurm, tmp_path, spec, tmp_path / "data",
                         env={"DASK_DISTRIBUTED__DEPLOY__LOST_WORKER_TIMEOUT": "1s"})
    cancelled: list[str] = []
    canceller = threading.Thread(target=_scancel_the_holder, args=(slurm, touch_dir, 4, cancelled))
    canceller.start()
    key = _finish(child)
    canceller.join()
    assert len(cancelled) == 1
    made = made_shards(touch_dir)
    assert made.count(4) == 2 and set(made) == set(range(24))  # shard 4 ran again on another job
    assert [job for _, job in shard_makers(touch_dir, 4)].count(cancelled[0]) == 1
    submitted = slurm.submitted_ids() - before
    assert len(submitted) == 3 and cancelled[0] in submitted  # two at the start, one replacement
    # the replacement may start after the other job made the last shards (on a loaded machine it does)
    jobs = {job for shard in range(24) for _, job in shard_makers(touch_dir, shard)}
    assert cancelled[0] in jobs and jobs <= submitted
    _assert_same_as_local(NoiseSpec(n_examples=96, shard_size=4, seed=6), tmp_path / "data", tmp_path, key)
