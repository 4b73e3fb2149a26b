"""The parallel builder: a spec's seeded shards fanned out through a session, then cached.

A *spec* is any object with these members (duck typing, see `Spec`)::

    class MySpec:
        kind = "my-dataset"      # cache kind
        n_examples: int
        shard_size: int
        seed: int
        def params(self) -> dict: ...          # everything that determines the output
        def make_shard(self, index, rng, n) -> dict[str, numpy.ndarray]: ...
        # optional:
        def prepare(self, context) -> None: ...    # on the driver, before any shard: fetch
                                                   # and convert what the shards read
        def metadata(self) -> dict: ...        # JSON facts about the output, kept as
                                               # BuiltDataset.metadata
        def own_sources(self, context) -> dict: ...  # the own copies (unverified) of
                                               # upstream files it would read: {} for none

``prepare`` gets the build's `~glyphforge.context.DataContext` (data dir, mirrors,
offline, verify, progress); a context is an ``os.PathLike`` of its data dir (and
``str(context)``, ``context / "name"`` work as on a path), so a ``prepare(data_dir)``
that treats its argument as a path keeps working.

A spec reading own copies (``own_sources`` not empty: `glyphforge.scenes.sources.own_sources`)
is keyed by them too (:data:`OWN_SOURCES` in its params, decided by the driver before the cache
is looked at; workers are handed the entry, never derive a key) and its entry's meta says
``verified: false``: it never stands in for the entry built from upstream's files, and every
listing and open says "your own copy (unverified)".

``make_shard`` and ``metadata`` may take a keyword ``data_dir``: the shard task then
passes the build's data dir (workers read prepared data from there and never
download: what is missing fails the shard with a message saying what to prepare).

The dataset's *images* (the first item of ``ds[i]`` and of every batch) are the array
``metadata()`` names with ``"images": name``, else the array called ``"images"``, else
the first array ``make_shard`` returns (`glyphforge.builds.shards.images_array`).

Shard ``i`` holds examples ``[i * shard_size, min((i + 1) * shard_size, n_examples))``
and draws from ``numpy.random.SeedSequence(seed).spawn(n_shards)[i]``, so the output
depends only on the spec, never on the session or its number of workers.

The entry's one file, ``arrays.pklz``, is the shard files joined without
recompression (see `glyphforge.builds.dataset`). Built into a data dir that is a URL
(object storage), an entry keeps one part per shard instead, written by the workers
(`glyphforge.builds.remote_build`).
"""
from __future__ import annotations

import importlib
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from glyphforge._checks import PathLike, check_int, worker_count
from glyphforge.builds.dataset import ARRAYS_FILE, BuiltDataset
from glyphforge.builds.index import INDEX_FILE, ShardIndex
from glyphforge.builds.shards import (
    ShardRecord,
    ShardTask,
    completed_shards,
    count_shards,
    forget_shard,
    images_array,
    remove_partial_files,
    shard_bounds,
    shard_path,
)
from glyphforge.cache import Writer, concat_pklz
from glyphforge.cache.declared import MAX_SHARDS
from glyphforge.cache.pklz import MemberMismatchError
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError, BuildError
from glyphforge.session import Session, TaskFailure, check_session, open_session
from glyphforge.session.base import check_main_guard
from glyphforge.storage.location import Location
from glyphforge.textfmt import count

log = logging.getLogger(__name__)

BUILD_FORMAT = 3
"""Bumped when the builder's output for the same spec changes; part of every key (``params["builder"]``).
2: shards are compressed by zlib, not isal (`glyphforge.cache.pklz`).
3: a shard's member holds its arrays as ``.npy`` files, not a pickle (`glyphforge.cache.npy_members`).
Entries of earlier formats are of cache format 1 too, and not read (`glyphforge.cache.keys.FORMAT_VERSION`)."""

#: The params key of the own copies a spec read (only when it read some: upstream builds keep their keys).
OWN_SOURCES = "own_sources"
_SPEC_MEMBERS = ("kind", "n_examples", "shard_size", "seed", "params", "make_shard")


class Spec(Protocol):
    """What `build` needs from a spec (any object with these members)."""

    kind: str
    n_examples: int
    shard_size: int
    seed: int

    def params(self) -> dict[str, Any]: ...

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]: ...


class ShardMaker(Protocol):
    """What a session maps over shard indices: `ShardTask`, or a remote build's task."""

    @property
    def spec(self) -> Any: ...

    def __call__(self, index: int) -> ShardRecord: ...


class SpecError(ArgumentError, BuildError, ValueError):
    """A spec is unusable as given (a bad count, class or name): found before any shard runs; fix the arguments."""


class SourcesChangedError(BuildError, RuntimeError):
    """The own copies a build reads changed between deciding its key and preparing them."""


class ShardError(BuildError, RuntimeError):
    """A shard could not be made; ``shard`` is its index, the message says why."""

    def __init__(self, shard: int, message: str) -> None:
        self.shard = shard
        super().__init__(message)


def check_spec(spec: Any) -> None:
    """Raise TypeError / `SpecError` naming what makes ``spec`` unusable by `build`."""
    missing = [name for name in _SPEC_MEMBERS if not hasattr(spec, name)]
    if missing:
        raise TypeError(
            f"{type(spec).__name__} is not a build spec: it lacks {', '.join(missing)}. A spec needs "
            "kind, n_examples, shard_size, seed, params() and make_shard(index, rng, n)"
        )
    try:
        for name, minimum in (("n_examples", 1), ("shard_size", 1), ("seed", 0)):
            check_int(f"spec.{name}", getattr(spec, name), minimum)
    except ValueError as error:
        raise SpecError(str(error)) from None
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    if n_shards > MAX_SHARDS:
        raise SpecError(
            f"{spec.n_examples:,} examples in shards of {spec.shard_size:,} make {n_shards:,} shards, more than the "
            f"{MAX_SHARDS:,} a build may have: raise shard_size to at least {-(-spec.n_examples // MAX_SHARDS):,}"
        )
    for name in ("params", "make_shard", "prepare", "metadata"):
        if hasattr(spec, name) and not callable(getattr(spec, name)):
            raise TypeError(f"spec.{name} must be a method, got {type(getattr(spec, name)).__name__}")


def cache_params(spec: Any, context: DataContext | None = None) -> dict[str, Any]:
    """Return the cache parameters of ``spec``: its ``params()`` plus how it is cut and seeded, and, with the
    build's ``context``, the own copies it reads there (`own_sources`), when it reads some."""
    params = {
        "spec": spec.params(),
        "n_examples": int(spec.n_examples),
        "shard_size": int(spec.shard_size),
        "seed": int(spec.seed),
        "builder": BUILD_FORMAT,
    }
    own = {} if context is None else own_sources(spec, context)
    return {**params, OWN_SOURCES: own} if own else params


def own_sources(spec: Any, context: DataContext) -> dict[str, Any]:
    """The own copies (unverified) ``spec`` reads with ``context``: its optional ``own_sources(context)``, else none."""
    method = getattr(spec, "own_sources", None)
    return dict(method(context)) if callable(method) else {}


def build(
    spec: Spec, session: Session | str | None = None, data_dir: PathLike | None = None,
    progress: bool = True, session_options: Mapping[str, Any] | None = None, context: DataContext | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> BuiltDataset:
    """Build ``spec`` shard by shard through ``session``; return the cached dataset.

    Parameters
    ----------
    spec
        A spec (see the module docstring). Its ``prepare(context)``, if any, runs
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
        instead, without a shared filesystem (see `glyphforge.builds.remote_build`).
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
        data dir, the reader of the entry where it lies (`glyphforge.builds.remote.open_built`).

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
    if context.remote is not None:
        from glyphforge.builds.remote_build import build_into  # it builds on this module

        return _open_remote(build_into(spec, context, session, progress=progress, session_options=session_options))
    root = context.data_dir
    store = context.store
    params = cache_params(spec, context)
    entry = store.get(spec.kind, params)
    if entry is not None:
        return BuiltDataset(entry)
    work_dirs: list[Path] = []

    def fill(writer: Writer) -> None:
        if callable(getattr(spec, "prepare", None)):
            spec.prepare(context)  # type: ignore[attr-defined]  # optional member, checked just above
            check_sources(spec, context, params)
        if OWN_SOURCES in params:
            writer.meta["verified"] = False
        work_dirs.append(store.work_dir(spec.kind, params))
        _build_shards(spec, store.key(spec.kind, params), work_dirs[0], root, writer, session,
                      dict(session_options or {}), progress)

    entry = store.get_or_create(spec.kind, params, fill)
    for work_dir in work_dirs:  # its shards are in the entry now: delete them without waiting
        store.discard_in_background(work_dir)
    return BuiltDataset(entry)


def check_build_arguments(spec: Any, session: Session | str | None, session_options: Mapping[str, Any] | None,
                          caller: str) -> None:
    """Check what a build is given before any work (also on a cache hit), as `build` documents; ``caller`` names it."""
    check_main_guard(caller)
    check_spec(spec)
    if isinstance(session, Session):
        if session_options:
            raise ValueError("session_options apply when build opens the session from a string; "
                             "this session is already open: give its options to open_session instead")
    else:  # a bad session string or option fails now, before any work (also on a cache hit)
        check_session(session or "local", session_options)


def check_sources(spec: Spec, context: DataContext, params: Mapping[str, Any]) -> None:
    """After the prepare: refuse a build whose own copies (`own_sources`) are not those its key ``params`` names.

    Raises
    ------
    SourcesChangedError
        Files in ``raw/`` changed (or the prepare chose others) since the key was decided.
    """
    if own_sources(spec, context) != params.get(OWN_SOURCES, {}):
        raise SourcesChangedError(
            f"the {spec.kind} build read other files than those it was keyed by: your own copies (unverified) of "
            f"upstream files in {context.data_dir / 'raw'} changed while it prepared them. Leave them as they are "
            "and build again")


def _open_remote(location: Location) -> BuiltDataset:
    """The reader of the built entry at ``location`` (`glyphforge.builds.remote.open_built`)."""
    remote = importlib.import_module("glyphforge.builds.remote")  # the remote reader (#25), imported when used
    dataset: BuiltDataset = remote.open_built(location)
    return dataset


def _build_shards(
    spec: Spec, key: str, work_dir: Path, data_dir: Path, writer: Writer, session: Session | str | None,
    session_options: dict[str, Any], progress: bool,
) -> None:
    """Make the missing shards, then concatenate all of them into ``writer``'s entry.

    Reused shards (finished by an earlier, interrupted build) are checked against their
    recorded sha256 while they are joined; one that changed on disk is made again.
    """
    started = time.perf_counter()
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    remove_partial_files(work_dir)
    records = completed_shards(work_dir, n_shards)
    reused = set(records)
    examples_reused = sum(record["n"] for record in records.values())
    task = ShardTask(spec, str(work_dir), str(data_dir))
    workers = 0
    while True:
        missing = [index for index in range(n_shards) if index not in records]
        if missing:
            workers = make_shards(task, missing, records, session, session_options, progress)
        try:
            joined = concat_pklz(
                [shard_path(work_dir, index) for index in range(n_shards)], writer.path / ARRAYS_FILE,
                expected_sha256=[records[index]["sha256"] if index in reused else None for index in range(n_shards)],
            )
            break
        except MemberMismatchError as changed:  # bit rot under an unchanged size and mtime: make it again
            log.warning("shard %d of %s changed on disk since it was made; making it again", changed.index, spec.kind)
            forget_shard(work_dir, changed.index)
            reused.discard(changed.index)
            examples_reused -= records.pop(changed.index)["n"]
    writer.known_sha256[ARRAYS_FILE] = joined.sha256
    ShardIndex.from_lengths(joined.lengths, [records[shard]["n"] for shard in range(n_shards)]).write(
        writer.path / INDEX_FILE)
    writer.meta.update(
        n_examples=int(spec.n_examples),
        n_shards=n_shards,
        layout=common_layout(records, spec.kind),
        metadata=records[0].get("metadata", {}),
        images=images_array(records[0]["layout"], records[0].get("metadata", {}), spec.kind),
    )
    seconds = time.perf_counter() - started
    summary = (
        f"built {spec.kind} {key[:12]}: {n_shards} shards ({n_shards - len(reused)} made, {len(reused)} reused), "
        f"{spec.n_examples} examples in {seconds:.1f} s on {workers} workers "
        f"({(spec.n_examples - examples_reused) / seconds:,.0f} examples/s made)"
    )
    if progress:
        print(summary, file=sys.stderr)
    else:
        log.info(summary)


def make_shards(
    task: ShardMaker, missing: list[int], records: dict[int, ShardRecord], session: Session | str | None,
    session_options: dict[str, Any], progress: bool,
) -> int:
    """Make the ``missing`` shards through ``session`` (opened here from a string); return its worker count."""
    spec = task.spec
    owned = not isinstance(session, Session)
    active = session if isinstance(session, Session) else _open(session or "local", session_options, len(missing))
    try:
        _run_shards(task, missing, records, active, progress)
        return active.n_workers
    except TaskFailure as failure:
        shard = missing[failure.index]
        start, stop = shard_bounds(shard, spec.n_examples, spec.shard_size)
        raise ShardError(
            shard,
            f"shard {shard} of {spec.kind!r} (examples {start} to {stop - 1}) failed: {failure.reason}\n"
            f"The {len(records)} finished shards are kept; run the build again to resume.",
        ) from failure
    finally:
        if owned:
            active.close()


def _open(session: str, options: dict[str, Any], n_tasks: int) -> Session:
    """Open ``session`` with no more local workers than there are shards to make."""
    kind, options = check_session(session, options)
    if kind in ("processes", "dask") and "address" not in options:
        wanted = worker_count(options.get("n_workers"))
        if wanted > n_tasks:
            log.info("starting %s, not %d: only %s to make", count(n_tasks, "worker", "workers"), wanted,
                     count(n_tasks, "shard", "shards"))
        options["n_workers"] = min(wanted, n_tasks)
    return open_session(kind, **options)


def _run_shards(
    task: ShardMaker, missing: list[int], records: dict[int, ShardRecord], session: Session, progress: bool
) -> None:
    """Map ``task`` over the ``missing`` shards, adding each finished one to ``records``."""
    from tqdm import tqdm

    spec = task.spec
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    done_examples = sum(record["n"] for record in records.values())
    with tqdm(total=spec.n_examples, initial=done_examples, unit="ex", unit_scale=True,
              desc=f"{spec.kind}", disable=not progress, file=sys.stderr) as bar:
        bar.set_postfix_str(f"shards {len(records)}/{n_shards}")
        for _, record in session.map(task, missing):
            records[record["shard"]] = record
            bar.update(record["n"])
            bar.set_postfix_str(f"shards {len(records)}/{n_shards}")


def common_layout(records: dict[int, ShardRecord], kind: str) -> dict[str, Any]:
    """Return the array layout all shards share, or raise naming the first shard that differs."""
    first = records[0]["layout"]
    for index in sorted(records):
        if records[index]["layout"] != first:
            raise ShardError(
                index,
                f"shard {index} of {kind!r} returned arrays {records[index]['layout']} but shard 0 "
                f"returned {first}; make_shard must return the same names, dtypes and per-example "
                "shapes for every shard",
            )
    return first
