"""Sessions: where a build's tasks run, behind one interface.

``open_session(kind, **options)`` returns a `Session` for one of these backends
(each imported only when used, so Dask is never imported for a local build):

* ``local``: serial, in this process;
* ``processes``: spawned local processes, tasks sent with dill;
* ``dask``: an existing scheduler (``address=``) or a ``LocalCluster`` it owns;
* ``slurm`` / ``pbs``: Dask workers submitted as batch jobs through dask-jobqueue.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from glyphforge.session.base import (
    MainGuardError,
    NoWorkersError,
    Session,
    SessionError,
    TaskError,
    TaskFailure,
    WorkerDiedError,
    WorkerStartError,
)
from glyphforge.session.parse import SESSION_FORMS, parse_session

__all__ = [
    "SESSION_FORMS",
    "MainGuardError",
    "NoWorkersError",
    "Session",
    "SessionError",
    "TaskError",
    "TaskFailure",
    "WorkerDiedError",
    "WorkerStartError",
    "check_session",
    "open_session",
    "parse_session",
]

#: kind -> (module, class, fixed keyword arguments)
_BACKENDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "local": ("glyphforge.session.local", "LocalSession", {}),
    "processes": ("glyphforge.session.processes", "ProcessesSession", {}),
    "dask": ("glyphforge.session.dask_backend", "DaskSession", {}),
    "slurm": ("glyphforge.session.jobqueue", "JobQueueSession", {"system": "slurm"}),
    "pbs": ("glyphforge.session.jobqueue", "JobQueueSession", {"system": "pbs"}),
}


def check_session(session: str = "local", options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Return the backend of a session string and all its options, checked; nothing is started.

    Parameters
    ----------
    session
        A backend name or a full session string (see `parse_session`).
    options
        Further options, e.g. ``{"n_workers": 4}`` or ``{"cores": 4, "memory": "16GB"}``.

    Returns
    -------
    tuple
        ``(kind, options)``: the backend and the options of the string with ``options`` added.

    Raises
    ------
    ValueError
        For an unknown session, an option that ``session`` sets to another value (``dask:1``
        with ``n_workers=3``), or a bad value (``n_workers`` not a sane positive integer).
    TypeError
        For an option the backend does not take (the message lists those it takes).
    """
    name, parsed = parse_session(session)
    given = dict(options or {})
    clashes = sorted(key for key in parsed.keys() & given.keys() if parsed[key] != given[key])
    if clashes:
        said = ", ".join(f"{key}={parsed[key]!r}" for key in clashes)
        asked = ", ".join(f"{key}={given[key]!r}" for key in clashes)
        raise ValueError(
            f"session {session!r} sets {said}, which the options set differently ({asked}); give each option once"
        )
    merged = {**parsed, **given}
    _backend(name).check_options(session, merged, _BACKENDS[name][2])
    return name, merged


def _backend(name: str) -> type[Session]:
    """The session class of backend ``name`` (its module imported now)."""
    module, cls_name, _ = _BACKENDS[name]
    backend: type[Session] = getattr(importlib.import_module(module), cls_name)
    return backend


def open_session(kind: str = "local", **options: Any) -> Session:
    """Open a session; use it as a context manager so `Session.close` always runs.

    Parameters
    ----------
    kind
        A backend (``local``, ``processes``, ``dask``, ``slurm``, ``pbs``) or a full
        session string such as ``"processes:8"`` or ``"dask://127.0.0.1:8786"``
        (see `parse_session`).
    **options
        The backend's options, e.g. ``n_workers=`` (processes, dask), ``address=``
        (dask), ``cores=, memory=, jobs=`` and any dask-jobqueue keyword (slurm, pbs);
        checked before anything starts (see `check_session`).

    Examples
    --------
    >>> with open_session("processes:2") as session:           # doctest: +SKIP
    ...     results = dict(session.map(abs, [-1, -2, -3]))
    """
    name, checked = check_session(kind, options)
    return _backend(name)(**_BACKENDS[name][2], **checked)
