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
        (dask), ``cores=, memory=, jobs=`` and any dask-jobqueue keyword (slurm, pbs).

    Examples
    --------
    >>> with open_session("processes:2") as session:           # doctest: +SKIP
    ...     results = dict(session.map(abs, [-1, -2, -3]))
    """
    name, parsed = parse_session(kind)
    clashes = {key for key in parsed.keys() & options.keys() if parsed[key] != options[key]}
    if clashes:
        raise ValueError(
            f"session {kind!r} sets {', '.join(sorted(clashes))}, which the keyword arguments "
            "set differently; give each option once"
        )
    module, cls_name, fixed = _BACKENDS[name]
    cls = getattr(importlib.import_module(module), cls_name)
    return cls(**fixed, **parsed, **options)
