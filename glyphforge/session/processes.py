"""The ``processes`` session: tasks on spawned local worker processes, sent with dill."""
from __future__ import annotations

import functools
import multiprocessing
import signal
import traceback
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any

import dill

from glyphforge._checks import check_int, requested_workers
from glyphforge.session.base import (
    MAIN_GUARD_ADVICE,
    Session,
    WorkerDiedError,
    WorkerStartError,
    run_task,
    unwrap,
)

_CONTEXT = multiprocessing.get_context("spawn")
#: A worker's first message: it started (imported the main script and everything else) and serves tasks.
_READY = b"glyphforge worker ready"


@functools.lru_cache(maxsize=1)
def _load_fn(fn_bytes: bytes) -> Callable[[Any], Any]:
    """Unpickle a map's function once per worker (every task of a map sends the same bytes)."""
    return dill.loads(fn_bytes)


def _call(payload: tuple[bytes, bytes]) -> Any:
    fn_bytes, item_bytes = payload
    return _load_fn(fn_bytes)(dill.loads(item_bytes))


def _serve(conn: Connection) -> None:
    """Worker main loop: say it is ready (`_READY`), then run ``(fn, item)`` tasks until the parent hangs up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        conn.send_bytes(_READY)
    except OSError:
        return
    while True:
        try:
            payload = conn.recv()
        except (EOFError, OSError):
            return
        outcome = run_task(_call, payload)
        try:
            reply = dill.dumps(outcome)
        except Exception:
            reply = dill.dumps((False, (f"the task's result cannot be pickled:\n{traceback.format_exc()}", None)))
        try:
            conn.send_bytes(reply)
        except OSError:
            return


class _Worker:
    """One spawned worker process, the parent's end of its pipe, its current task and whether it said it is ready."""

    def __init__(self) -> None:
        self.conn, child_conn = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_serve, args=(child_conn,), name="glyphforge-worker")
        self.process.start()
        child_conn.close()
        self.task: tuple[int, Any] | None = None
        self.ready = False

    def stop(self, kill: bool = False, timeout: float = 5.0) -> str:
        """Stop the process (hang up, or SIGKILL); return how it ended (``SIGKILL``, ``exit code 1``)."""
        self.conn.close()
        if kill:
            self.process.kill()
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        code = self.process.exitcode
        self.process.close()
        if code is not None and code < 0:
            return signal.Signals(-code).name
        return f"exit code {code}"


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.stop(kill=worker.task is not None)
    workers.clear()


class ProcessesSession(Session):
    """Run tasks on ``n_workers`` local processes started with the spawn method.

    Tasks and their arguments travel as dill pickles, so closures and locally defined
    spec classes work. A task whose worker dies is retried on a fresh worker, at most
    ``max_retries`` times.

    Parameters
    ----------
    n_workers
        Number of worker processes; default: the CPU count.
    max_retries
        How many times a task is retried after its worker died before
        `WorkerDiedError` is raised.
    """

    kind = "processes"

    def __init__(self, n_workers: int | None = None, max_retries: int = 2) -> None:
        super().__init__()
        n_workers = requested_workers(n_workers)
        self.max_retries = check_int("max_retries", max_retries, 0)
        self._workers = [_Worker() for _ in range(n_workers)]
        # Also stop the workers when the session is dropped unclosed or at exit.
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)

    @classmethod
    def _check_values(cls, options: Mapping[str, Any]) -> None:
        requested_workers(options.get("n_workers"))
        check_int("max_retries", options.get("max_retries", 0), 0)

    @property
    def n_workers(self) -> int:
        return len(self._workers)

    def _release(self) -> None:
        self._finalizer()

    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[int, Any]]:
        fn_bytes = dill.dumps(fn, recurse=True)
        todo = deque(enumerate(items))
        deaths: Counter[int] = Counter()
        try:
            while todo or any(w.task for w in self._workers):
                for worker in self._workers:
                    if worker.task is None and todo:
                        worker.task = todo.popleft()
                        worker.conn.send((fn_bytes, dill.dumps(worker.task[1], recurse=True)))
                busy = [w for w in self._workers if w.task is not None]
                ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
                for worker in busy:
                    task = worker.task
                    if task is None or (worker.conn not in ready and worker.process.sentinel not in ready):
                        continue
                    index, item = task
                    try:
                        reply = worker.conn.recv_bytes()
                    except (EOFError, OSError):
                        if not worker.ready:
                            self._check_started(worker)
                        detail = self._replace(worker)
                        deaths[index] += 1
                        if deaths[index] > self.max_retries:
                            raise WorkerDiedError(index, f"{deaths[index]} attempts; last exit: {detail}") from None
                        todo.appendleft((index, item))
                        continue
                    if not worker.ready:  # its first message: _READY
                        worker.ready = True
                        continue
                    worker.task = None
                    yield index, unwrap(index, dill.loads(reply))
        finally:
            for worker in [w for w in self._workers if w.task is not None]:
                self._replace(worker)  # abandoned mid-task: its late result must not leak

    def _check_started(self, worker: _Worker) -> None:
        """Close the session and raise `WorkerStartError` if ``worker`` exited on its own before it was ready.

        Every new worker would fail the same way (its script, its imports), so none is
        started again; a worker killed by a signal is retried as any other.
        """
        worker.process.join(5.0)
        code = worker.process.exitcode
        if code is not None and code >= 0:
            self.close()
            raise WorkerStartError(
                f"a worker process of the processes session exited (exit code {code}) while starting, before it "
                "could run any task; its own error is printed above (stderr). Most often the script that started "
                f"the session calls build() or open_session() at its top level: {MAIN_GUARD_ADVICE}"
            ) from None

    def _replace(self, worker: _Worker) -> str:
        """Stop ``worker`` (killing it if busy), start a fresh one in its place; say how it ended."""
        detail = worker.stop(kill=worker.task is not None)
        self._workers[self._workers.index(worker)] = _Worker()
        return detail
