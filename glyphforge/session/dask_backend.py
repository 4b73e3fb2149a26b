"""The ``dask`` session: tasks on a Dask distributed cluster (existing, or a LocalCluster it owns)."""
from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError
from typing import Any

from distributed import Client, Future, LocalCluster, Nanny, Worker, as_completed
from distributed.scheduler import KilledWorker

from glyphforge._checks import requested_workers
from glyphforge.session.base import (
    NoWorkersError,
    Outcome,
    Session,
    SessionError,
    WorkerDiedError,
    keywords,
    run_task,
    unwrap,
)

_POLL_SECONDS = 0.02
_WORKER_CHECK_SECONDS = 1.0
_RPC_SECONDS = 5.0


def _check_own_cluster_options(address: str, options: Mapping[str, Any]) -> None:
    """Refuse ``n_workers`` and LocalCluster ``options`` (those not None) with the ``address`` of a scheduler."""
    given = sorted(name for name, value in options.items() if value is not None)
    if given:
        raise ValueError(
            f"n_workers and LocalCluster options only apply when the session starts its own cluster (given: "
            f"{', '.join(given)}); the scheduler at {address} runs the tasks on its own workers"
        )


class DaskSession(Session):
    """Run tasks on a Dask cluster.

    Dask reruns the tasks of a worker that died (up to the scheduler's
    ``distributed.scheduler.allowed-failures``). Waiting never hangs: when no worker
    is connected for ``no_workers_timeout`` seconds while tasks remain, `map`
    raises `NoWorkersError`.

    Parameters
    ----------
    address
        ``tcp://host:port`` of a running scheduler. None: start a
        ``distributed.LocalCluster`` on 127.0.0.1, owned (closed) by the session.
    n_workers
        Workers of the owned LocalCluster (default: the CPU count), one thread each.
    no_workers_timeout
        Seconds without any connected worker before `map` gives up (None: wait forever).
    connect_timeout
        Seconds to wait for the scheduler at ``address``.
    **cluster_options
        Further ``LocalCluster`` keywords (only without ``address``).
    """

    kind = "dask"

    def __init__(
        self,
        address: str | None = None,
        n_workers: int | None = None,
        no_workers_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        **cluster_options: Any,
    ) -> None:
        if address is not None:
            _check_own_cluster_options(address, {"n_workers": n_workers, **cluster_options})
            self._attach(Client(address, timeout=connect_timeout), None, no_workers_timeout)
            return
        n_workers = requested_workers(n_workers)
        options = {"threads_per_worker": 1, "processes": True, "dashboard_address": None, **cluster_options}
        if options["processes"]:  # in-process workers talk over inproc://, not TCP
            options.setdefault("host", "127.0.0.1")
        cluster = LocalCluster(n_workers=n_workers, **options)
        try:
            client = Client(cluster)
        except BaseException:
            cluster.close()  # the session never existed: release what it started
            raise
        self._attach(client, cluster, no_workers_timeout)

    def _attach(self, client: Client, cluster: Any, no_workers_timeout: float | None) -> None:
        """Finish construction with a connected ``client`` and the ``cluster`` the session owns."""
        super().__init__()
        self.client = client
        scheduler = client.scheduler
        assert scheduler is not None and scheduler.address is not None, "a connected Client knows its scheduler"
        self.address: str = scheduler.address
        self.cluster = cluster
        self.no_workers_timeout = no_workers_timeout

    @classmethod
    def accepted_options(cls, **fixed: Any) -> frozenset[str]:
        return keywords(cls.__init__, LocalCluster.__init__, Worker.__init__, Nanny.__init__)

    @classmethod
    def _check_values(cls, options: Mapping[str, Any]) -> None:
        address = options.get("address")
        if address is not None:
            own = keywords(DaskSession.__init__) - {"n_workers"}
            _check_own_cluster_options(address, {name: value for name, value in options.items() if name not in own})
        requested_workers(options.get("n_workers"))

    @property
    def n_workers(self) -> int:
        return len(self.client.nthreads())

    def _release(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def _on_worker_check(self, n_workers: int) -> None:
        """Hook called about once a second while waiting (jobqueue replaces lost jobs)."""

    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[int, Any]]:
        prefix = f"glyphforge-task-{uuid.uuid4().hex[:12]}"
        # One map call: one graph message, in which ``fn`` is pickled once, not per task.
        futures = self.client.map(
            functools.partial(run_task, fn), items, key=[f"{prefix}-{index}" for index in range(len(items))],
            pure=False,
        )
        index_of = {future.key: index for index, future in enumerate(futures)}
        # with_results: results are fetched in the background, so a worker dying while
        # holding one (Dask then computes it again) never blocks the loop below.
        pending = as_completed(futures, with_results=True, raise_errors=False)
        next_check, workerless_since = time.monotonic(), None
        try:
            while not pending.is_empty():
                batch = pending.next_batch(block=False)
                for future, result in batch:
                    index = index_of[future.key]
                    outcome = self._outcome(future, result, index)
                    future.release()
                    yield index, unwrap(index, outcome)
                now = time.monotonic()
                if batch:
                    workerless_since = None
                elif now >= next_check:
                    next_check = now + _WORKER_CHECK_SECONDS
                    workerless_since = self._check_workers(workerless_since, pending.count())
                if not batch:
                    time.sleep(_POLL_SECONDS)
        finally:
            unfinished = [future for future in futures if not future.done()]
            if unfinished and self.client.status == "running":
                self.client.cancel(unfinished)

    def _check_workers(self, workerless_since: float | None, remaining: int) -> float | None:
        """Raise `NoWorkersError` once no worker was seen for ``no_workers_timeout`` seconds."""
        lost = SessionError(
            f"lost the connection to the Dask scheduler at {self.address} with {remaining} tasks unfinished"
        )
        if self.client.status != "running":
            raise lost
        try:  # bounded: a vanished scheduler must not stall us for the 30 s connect timeout
            n_workers = len(self.client.nthreads(callback_timeout=_RPC_SECONDS))
        except TimeoutError:  # also asyncio's (the same class since Python 3.11)
            return workerless_since  # a busy scheduler: ask again at the next check
        except OSError as error:
            raise lost from error
        self._on_worker_check(n_workers)
        if n_workers:
            return None
        now = time.monotonic()
        workerless_since = now if workerless_since is None else workerless_since
        if self.no_workers_timeout is not None and now - workerless_since >= self.no_workers_timeout:
            raise NoWorkersError(
                f"{remaining} tasks are waiting but the Dask cluster at {self.address} "
                f"has had no worker for {now - workerless_since:.0f} s (no_workers_timeout="
                f"{self.no_workers_timeout:g}): all workers died or none could start. Start "
                "workers (`dask worker ADDRESS`) and run again."
            )
        return workerless_since

    def _outcome(self, future: Future, result: Any, index: int) -> Outcome:
        """Return the worker's outcome from a fetched ``result``, or raise why there is none.

        Judged by ``result``, not only ``future.status``: a worker that dies after its
        result was fetched turns the future "lost", yet the result in hand is good.
        """
        if isinstance(result, CancelledError):
            raise SessionError(
                f"task {index} was cancelled: the Dask scheduler at {self.address} was shut down or "
                "lost (or another client cancelled the task)"
            )
        if future.status == "error":
            error = result[1]  # (type, exception, traceback)
            if isinstance(error, KilledWorker):
                raise WorkerDiedError(index, str(error))
            raise SessionError(f"task {index} failed in the Dask cluster: {error!r}")
        return result
