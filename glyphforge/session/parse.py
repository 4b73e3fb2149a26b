"""Session strings for the command line: ``local``, ``processes:8``, ``dask://host:port``, ``slurm``."""
from __future__ import annotations

from typing import Any

from glyphforge._checks import worker_count

#: The accepted forms, quoted in error messages and ``--help`` texts.
SESSION_FORMS = (
    "local",
    "processes[:N_WORKERS]",
    "dask[:N_WORKERS]",
    "dask://HOST:PORT (or tcp://HOST:PORT)",
    "slurm[:JOBS]",
    "pbs[:JOBS]",
)

#: Which option a ``kind:N`` number sets, per kind.
_COUNT_OPTION = {"processes": "n_workers", "dask": "n_workers", "slurm": "jobs", "pbs": "jobs"}


def parse_session(text: str) -> tuple[str, dict[str, Any]]:
    """Split a session string into a backend kind and its options.

    Parameters
    ----------
    text
        One of `SESSION_FORMS`, e.g. ``"processes:8"`` or ``"dask://127.0.0.1:8786"``.

    Returns
    -------
    tuple
        ``(kind, options)`` for ``open_session(kind, **options)``, e.g.
        ``("processes", {"n_workers": 8})`` or ``("dask", {"address": "tcp://127.0.0.1:8786"})``.

    Raises
    ------
    ValueError
        For an unknown kind or a count that is not a positive integer.
    """
    if not isinstance(text, str):
        raise TypeError(f"a session string must be a str, got {type(text).__name__}")
    spec = text.strip()
    for scheme in ("dask://", "tcp://", "tls://"):
        if spec.startswith(scheme):
            host_port = spec[len(scheme):]
            if not host_port or host_port.startswith(":"):
                raise ValueError(f"session {text!r} has no host: write e.g. dask://127.0.0.1:8786")
            protocol = "tls" if scheme == "tls://" else "tcp"
            return "dask", {"address": f"{protocol}://{host_port}"}
    kind, sep, count = spec.partition(":")
    kind = kind.lower()
    if kind == "local" and not sep:
        return "local", {}
    if kind not in _COUNT_OPTION:
        raise ValueError(f"unknown session {text!r}; use one of: {', '.join(SESSION_FORMS)}")
    if not sep:
        return kind, {}
    if not count.isdigit() or int(count) < 1:
        raise ValueError(
            f"session {text!r}: the number after {kind}: must be a positive integer "
            f"({_COUNT_OPTION[kind]}), e.g. {kind}:4"
        )
    if _COUNT_OPTION[kind] == "n_workers":  # local processes: refuse a count this machine cannot run usefully
        try:
            worker_count(int(count))
        except ValueError as error:
            raise ValueError(f"session {text!r}: {error}") from None
    return kind, {_COUNT_OPTION[kind]: int(count)}
