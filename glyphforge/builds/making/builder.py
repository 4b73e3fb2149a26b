"""`build`: a spec's seeded shards fanned out through a session, then cached where its context says.

What a spec is, and how it is checked and keyed: `glyphforge.builds.making.spec`. Where the entry
goes (the local cache store, or a data dir at a URL) is chosen once, here, from the build's
context: `glyphforge.builds.making.destinations`. ``SpecError`` and ``ShardError``, which `build`
raises, live with the spec.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from glyphforge._checks import PathLike
from glyphforge.builds.making.destinations import destination
from glyphforge.builds.making.spec import Spec, check_build_arguments
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.context import DataContext
from glyphforge.session import Session

__all__ = ["build"]


def build(
    spec: Spec, session: Session | str | None = None, data_dir: PathLike | None = None,
    progress: bool = True, session_options: Mapping[str, Any] | None = None, context: DataContext | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> BuiltDataset:
    """Build ``spec`` shard by shard through ``session``; return the cached dataset.

    Parameters
    ----------
    spec
        A spec (see `glyphforge.builds.making.spec`). Its ``prepare(context)``, if any, runs
        here before any shard is made (only when there is work to do).
    session
        A `glyphforge.session.Session` (used, not closed), a session string such as
        ``"processes:8"`` (opened and closed here), or None for ``"local"``. Only
        opened when there is work to do.
    data_dir
        Data dir whose cache holds the result and from which the shards read
        prepared data (default: see `glyphforge.config`). Workers write shards
        there: on a cluster it must be on a shared filesystem. A URL
        (``s3://bucket/x``, ``gs://...``, ``file://...``) builds into object storage
        instead, without a shared filesystem (see `glyphforge.builds.making.destinations`).
    progress
        Show a progress bar over shards and print a summary line (stderr).
    session_options
        Options for `glyphforge.open_session` when ``session`` is a string, e.g.
        ``{"cores": 4, "memory": "16GB"}`` for ``"slurm:8"``.
    context
        A `~glyphforge.context.DataContext` whose data dir, mirrors, ``offline`` and
        ``verify`` the spec's ``prepare`` fetches with (``data_dir``, when given, overrides
        its data dir; None: the environment's). ``progress=False`` also hides the
        prepare's progress bars.
    storage_options
        fsspec's options for a ``data_dir`` that is a URL (e.g. ``{"endpoint_url": ...}``);
        credentials come from the environment of each process, as the provider's SDK reads them.

    Returns
    -------
    BuiltDataset
        On a cache hit without any work. Otherwise finished shards found from an
        interrupted earlier build are verified and reused, the others made. For a URL
        data dir, the reader of the entry where it lies (`glyphforge.builds.reading.lookup.open_built`).

    Raises
    ------
    ValueError, TypeError
        A bad session string or option (see `glyphforge.session.check_session`): found
        before any work, also on a cache hit.
    ShardError
        A shard raised (the message holds its index and the worker's traceback) or
        its worker kept dying. Finished shards are kept: run again to resume.
    MainGuardError
        Called by a worker process while it imports the main script again: the
        script builds at its top level, without ``if __name__ == "__main__":``.
    """
    check_build_arguments(spec, session, session_options, "build()")
    context = DataContext.resolve(context, data_dir=data_dir, progress=None if progress else False,
                                  storage_options=storage_options)
    return destination(context).build(spec, session, progress=progress, session_options=session_options)
