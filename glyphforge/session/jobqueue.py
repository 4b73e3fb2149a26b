"""The ``slurm`` and ``pbs`` sessions: Dask workers submitted as batch jobs by dask-jobqueue."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distributed import Client

from glyphforge._checks import check_int
from glyphforge.session.base import keywords
from glyphforge.session.dask_backend import DaskSession

_SYSTEMS = ("slurm", "pbs")
#: dask-jobqueue keywords the session sets itself (the batch system comes from the session's name).
_SET_HERE = frozenset({"system", "scheduler", "job_cls", "job_kwargs", "base_class_kwargs", "loop", "asynchronous"})


def make_cluster(system: str = "slurm", cores: int = 1, memory: str = "2GB", **jobqueue_kwargs: Any) -> Any:
    """Return a dask-jobqueue cluster (scheduler started here, no job submitted yet).

    Parameters
    ----------
    system
        ``"slurm"`` (``SLURMCluster``) or ``"pbs"`` (``PBSCluster``).
    cores, memory
        Per job: cores and memory (``"4GB"``) requested from the batch system.
    **jobqueue_kwargs
        Any keyword of the dask-jobqueue cluster class: ``processes``, ``queue``,
        ``account``, ``walltime``, ``interface``, ``python``, ``job_extra_directives``,
        ``job_script_prologue``, ``local_directory``, ``scheduler_options``, ...
    """
    return _cluster_class(system)(cores=cores, memory=memory, **jobqueue_kwargs)


def _cluster_class(system: str) -> Any:
    """dask-jobqueue's cluster class of batch system ``system`` (imported only when a batch session is made)."""
    if system not in _SYSTEMS:
        raise ValueError(f"unknown batch system {system!r}; use one of {', '.join(_SYSTEMS)}")
    import dask_jobqueue

    return {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[system]


def job_script(system: str = "slurm", **options: Any) -> str:
    """Return the batch script a ``system`` session with ``options`` submits for each job.

    Nothing is submitted, so this works where the batch system is not installed.
    The options are those of `make_cluster`; the scheduler started to render the
    script serves its dashboard on a random local port unless told otherwise.
    """
    options.setdefault("scheduler_options", {"dashboard_address": "127.0.0.1:0"})
    cluster = make_cluster(system, **options)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


class JobQueueSession(DaskSession):
    """Dask workers running as SLURM or PBS jobs, submitted (and cancelled) by the session.

    A job that is lost (``scancel``, node failure, walltime) has its tasks rerun by
    Dask on the remaining workers, and is replaced by a new job once Dask declares it
    lost (``distributed.deploy.lost-worker-timeout``, 15 s by default).

    Parameters
    ----------
    system
        ``"slurm"`` or ``"pbs"``.
    cores, memory
        Per job (see `make_cluster`).
    jobs
        Number of jobs to keep running.
    no_workers_timeout
        Seconds without any connected worker (for example while jobs wait in the
        queue) before `map` raises `NoWorkersError`; None waits forever.
    **jobqueue_kwargs
        Passed to the dask-jobqueue cluster (see `make_cluster`).
    """

    def __init__(
        self,
        system: str = "slurm",
        cores: int = 1,
        memory: str = "2GB",
        jobs: int = 1,
        no_workers_timeout: float | None = 3600.0,
        **jobqueue_kwargs: Any,
    ) -> None:
        jobs = check_int("jobs", jobs, 1)
        cluster = make_cluster(system, cores=cores, memory=memory, **jobqueue_kwargs)
        try:
            cluster.scale(jobs=jobs)
            client = Client(cluster)
        except BaseException:
            cluster.close()
            raise
        self._attach(client, cluster, no_workers_timeout)
        self.kind = system
        self.jobs = jobs

    @classmethod
    def accepted_options(cls, system: str = "slurm", **fixed: Any) -> frozenset[str]:
        """This session's options and the keywords ``system``'s dask-jobqueue cluster and job classes take.

        Read from their signatures, so a keyword only the other system takes (``resource_spec`` is
        PBS's, ``job_mem`` SLURM's) is refused before any job is submitted.
        """
        from dask_jobqueue.core import Job, JobQueueCluster

        cluster_class = _cluster_class(system)
        passed_on = keywords(cluster_class.__init__, JobQueueCluster.__init__, cluster_class.job_cls.__init__,
                             Job.__init__)
        return (keywords(cls.__init__) | passed_on) - _SET_HERE

    @classmethod
    def _check_values(cls, options: Mapping[str, Any]) -> None:
        check_int("jobs", options.get("jobs", 1), 1)

    def job_script(self) -> str:
        """Return the batch script submitted for each job of this session."""
        return self.cluster.job_script()

    def _on_worker_check(self, n_workers: int) -> None:
        # Resubmits jobs that Dask has declared lost; a no-op while all are alive or queued.
        self.cluster.scale(jobs=self.jobs)
