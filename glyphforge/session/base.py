"""The session interface every backend implements, and the errors a session raises."""
from __future__ import annotations

import difflib
import inspect
import multiprocessing
import os
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from glyphforge.errors import BuildError, StorageError

#: What a worker sends back for one task: ``(True, result)`` or ``(False, (traceback text, summary))``
#: (the summary as `failure_summary` gives it).
Outcome = tuple[bool, Any]


class SessionError(BuildError, RuntimeError):
    """Base class of the errors a session raises while running tasks."""


class TaskFailure(SessionError):
    """A task failed; ``index`` is its item's position, ``reason`` says why.

    The message is ``"task <index>: <reason>"``; a caller that knows what the task
    was (the builder: a shard) can rephrase it with ``reason``.
    """

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"task {index}: {reason}")


class TaskError(TaskFailure):
    """A task raised an exception; ``traceback_text`` is the traceback from its worker.

    When the exception explains itself (``summary``, see `failure_summary`), ``reason`` is
    its message alone, for the user; the message of this error keeps the traceback.
    """

    def __init__(self, index: int, traceback_text: str, summary: str | None = None) -> None:
        self.traceback_text = traceback_text
        super().__init__(index, f"it raised an exception; the traceback from its worker:\n{traceback_text}")
        if summary is not None:
            self.reason = summary


class WorkerDiedError(TaskFailure):
    """A task's worker died (was killed, crashed) every time the task was tried."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(
            index,
            f"its worker died every time the task ran ({detail}); the task probably kills "
            "its worker (out of memory, a crash in native code, os._exit)",
        )


class NoWorkersError(SessionError):
    """Tasks were waiting while the session had no live worker for too long."""


class WorkerStartError(SessionError):
    """A worker process exited while starting, before it could run any task (its own error is on stderr)."""


class MainGuardError(BuildError, RuntimeError):
    """A build was started by a spawned process importing the main script again (no main guard)."""


#: What to do when a script starts work at its top level, for `MainGuardError` and `WorkerStartError`.
MAIN_GUARD_ADVICE = (
    'put the build (and any open_session) under `if __name__ == "__main__":` in the script and run it again: '
    "worker processes start by importing the script that started them, so without that guard every worker "
    "would start the build again"
)


def importing_main_in_spawned_child() -> bool:
    """Return True while a spawned child process runs the parent's main script again.

    Detected as multiprocessing does before it refuses to start processes then: the
    child is still bootstrapping (``current_process()._inheriting``) and runs the
    script as the module ``__mp_main__``.
    """
    bootstrapping = bool(getattr(multiprocessing.current_process(), "_inheriting", False))
    return bootstrapping and "__mp_main__" in sys.modules


def check_main_guard(what: str) -> None:
    """Raise `MainGuardError` when ``what`` (e.g. ``"build()"``) runs while a spawned child imports the main script.

    Without the check such a child would wait on a lock its parent holds, for an hour, silently.
    """
    if importing_main_in_spawned_child():
        script = getattr(sys.modules["__mp_main__"], "__file__", None) or "the main script"
        raise MainGuardError(
            f"{what} was called while this process, a worker started by process {os.getppid()}, was running "
            f"{script} again, as spawned worker processes do: the script calls {what} at its top level. To fix "
            f"this, {MAIN_GUARD_ADVICE}"
        )


def run_task(fn: Callable[[Any], Any], item: Any) -> Outcome:
    """Call ``fn(item)`` where a worker runs it and capture an exception as traceback text.

    Returning the text instead of raising keeps the error intact across process and
    machine boundaries (exception objects do not always pickle).
    """
    try:
        return True, fn(item)
    except Exception as error:
        return False, (traceback.format_exc(), failure_summary(error))


def failure_summary(error: BaseException) -> str | None:
    """Return the message of an error that says all a user needs (a `StorageError`: a full disk), else None.

    A task failing that way is reported by that message, without the worker's traceback.
    """
    return str(error) if isinstance(error, StorageError) else None


def unwrap(index: int, outcome: Outcome) -> Any:
    """Return the result inside ``outcome``, or raise `TaskError` for a failed task."""
    ok, value = outcome
    if not ok:
        traceback_text, summary = value
        raise TaskError(index, traceback_text, summary)
    return value


def keywords(*functions: Callable[..., Any]) -> frozenset[str]:
    """Return the names of the keyword arguments ``functions`` take (``self`` and ``**kwargs`` left out)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(
        name for function in functions for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind in kinds and name != "self"
    )


class Session(ABC):
    """Runtime resources (workers, their scratch space) that run a build's tasks.

    A session is a context manager: leaving the ``with`` block calls `close`, which
    releases everything the session started (processes, clusters, batch jobs).
    """

    #: Backend name, as accepted by ``open_session``.
    kind: str = ""

    def __init__(self) -> None:
        self._closed = False

    @abstractmethod
    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[int, Any]]:
        """Backend part of `map`: ``items`` is a list and the session is open."""

    @classmethod
    def accepted_options(cls, **fixed: Any) -> frozenset[str]:
        """The options (keyword arguments) this backend takes: its constructor's and those it passes on.

        ``fixed`` holds what the session's name sets (``system="pbs"`` for ``pbs``), for a backend
        whose options depend on it.
        """
        return keywords(cls.__init__)

    @classmethod
    def check_options(cls, name: str, options: Mapping[str, Any], fixed: Mapping[str, Any] | None = None) -> None:
        """Check the ``options`` of session ``name`` before anything starts.

        ``fixed``: the keyword arguments the session's name sets (see `accepted_options`).

        Raises
        ------
        TypeError
            For an option this backend does not take (the message lists those it takes).
        ValueError
            For a bad value (a worker count that is not a sane positive integer, ...).
        """
        accepted = cls.accepted_options(**(fixed or {}))
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise TypeError(_unknown_options_message(name, unknown, accepted))
        try:
            cls._check_values(options)
        except ValueError as error:
            raise ValueError(f"session {name!r}: {error}") from None

    @classmethod  # noqa: B027  # a deliberate no-op default: most backends have no value to check
    def _check_values(cls, options: Mapping[str, Any]) -> None:
        """Backend part of `check_options`: raise ValueError for a bad value (default: none is checked)."""

    @property
    @abstractmethod
    def n_workers(self) -> int:
        """Number of workers that can run tasks right now."""

    def _release(self) -> None:  # noqa: B027  # a deliberate no-op default: the local session starts nothing
        """Backend part of `close`: release what the session started (default: nothing)."""

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        """Run ``fn(item)`` for every item; yield ``(index, result)`` as tasks complete.

        Parameters
        ----------
        fn
            A picklable callable (dill for processes, cloudpickle for Dask), so closures
            and locally defined classes work.
        items
            The task arguments; ``index`` in the output is an item's position here.

        Raises
        ------
        TaskError
            A task raised; the message holds its index and the worker's traceback.
        WorkerDiedError, NoWorkersError
            Workers died too often, or none was left to run the remaining tasks.
        """
        if self._closed:
            raise SessionError(f"this {self.kind!r} session is closed; open a new one")
        return self._map(fn, list(items))

    def close(self) -> None:
        """Release everything the session started; calling it again does nothing."""
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.n_workers} workers"
        return f"<{type(self).__name__} {state}>"


def _unknown_options_message(name: str, unknown: list[str], accepted: frozenset[str]) -> str:
    """Say which options session ``name`` does not take, suggest close names, list those it takes."""
    guesses = sorted({guess for option in unknown for guess in difflib.get_close_matches(option, accepted, n=1)})
    hint = f" (did you mean {', '.join(map(repr, guesses))}?)" if guesses else ""
    takes = f"it takes {', '.join(sorted(accepted))}" if accepted else "it takes no options"
    return (f"session {name!r} got an unexpected keyword argument {', '.join(map(repr, unknown))}{hint}: {takes}. "
            "Leave the option out or use a session that takes it")
