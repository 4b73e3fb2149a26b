"""What a build needs from a spec, checked before any work, and what keys its entry.

A *spec* is any object with these members (duck typing, see `Spec`)::

    class MySpec:
        kind = "my-dataset"      # cache kind
        n_examples: int
        shard_size: int
        seed: int
        def params(self) -> dict: ...          # everything that determines the output
        def make_shard(self, index, rng, n) -> dict[str, numpy.ndarray]: ...
        # optional:
        def prepare(self, context) -> list[Entry] | None: ...  # on the driver, before any shard:
                                                   # fetch and convert what the shards read;
                                                   # return the cache entries they read
        def metadata(self) -> dict: ...        # JSON facts about the output, kept as
                                               # BuiltDataset.metadata
        def own_sources(self, context) -> dict: ...  # the own copies (unverified) of
                                               # upstream files it would read: {} for none

``prepare`` gets the build's `~glyphforge.context.DataContext` (data dir, mirrors,
offline, verify, progress); a context is an ``os.PathLike`` of its data dir (and
``str(context)``, ``context / "name"`` work as on a path), so a ``prepare(data_dir)``
that treats its argument as a path keeps working. It returns the entries of the context's
cache (`glyphforge.cache.Entry`) its shards read, which a build into a URL publishes there
for its workers (`glyphforge.builds.making.url_build`); None (the default): they read none.

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
the first array ``make_shard`` returns (`glyphforge.builds.making.shards.images_array`).
Every array must batch with torch's default collate (any ``DataLoader`` takes a built
dataset): strings only as one per example, never dates or records; class names are integer
codes in an array with the table of names as ``metadata()``'s ``"class_names"``
(``ds.classes``), as the scenes do.

Shard ``i`` holds examples ``[i * shard_size, min((i + 1) * shard_size, n_examples))``
and draws from ``numpy.random.SeedSequence(seed).spawn(n_shards)[i]``, so the output
depends only on the spec, never on the session or its number of workers.

`glyphforge.build` (`glyphforge.builds.making.builder`) takes a spec; where its entry goes is the
build's destination (`glyphforge.builds.making.destinations`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from glyphforge._checks import check_int
from glyphforge.builds.making.shards import count_shards
from glyphforge.cache.declared import MAX_SHARDS
from glyphforge.cache.entry import Entry
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError, BuildError
from glyphforge.session import Session, check_session
from glyphforge.session.base import check_main_guard

BUILD_FORMAT = 4
"""Bumped when the builder's output for the same spec changes; part of every key (``params["builder"]``).
2: shards are compressed by zlib, not isal (`glyphforge.cache.pklz`).
3: a shard's member holds its arrays as ``.npy`` files, not a pickle (`glyphforge.cache.npy_members`).
4: a shard is a run of gzip members, its arrays' rows in blocks of a member each, and the entry's ``blocks.npy``
   says where they are (`glyphforge.builds.reading.blocks`); a build without one is refused
   (`glyphforge.cache.declared`).
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


def run_prepare(spec: Spec, context: DataContext, params: Mapping[str, Any]) -> list[Entry]:
    """Run the spec's optional ``prepare(context)`` on the driver, then refuse a build whose own copies
    (`own_sources`) are no longer those its key ``params`` names: every destination runs this, once.

    Returns
    -------
    list of Entry
        The cache entries the prepare says the shards read (none without a prepare, or when it returns None).

    Raises
    ------
    SourcesChangedError
        Files in ``raw/`` changed (or the prepare chose others) since the key was decided.
    TypeError
        The prepare returned something other than None or cache entries.
    """
    if not has_prepare(spec):
        return []
    inputs = spec.prepare(context)  # type: ignore[attr-defined]  # optional member, checked just above
    if own_sources(spec, context) != params.get(OWN_SOURCES, {}):
        raise SourcesChangedError(
            f"the {spec.kind} build read other files than those it was keyed by: your own copies (unverified) of "
            f"upstream files in {context.data_dir / 'raw'} changed while it prepared them. Leave them as they are "
            "and build again")
    if inputs is None:
        return []
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(item, Entry) for item in inputs):
        raise TypeError(f"{type(spec).__name__}.prepare must return None or a list of the cache entries "
                        f"(glyphforge.cache.Entry) its shards read; it returned {inputs!r:.200}")
    return list(inputs)


def has_prepare(spec: Spec) -> bool:
    """Whether ``spec`` has the optional ``prepare`` (run before any shard by `run_prepare`)."""
    return callable(getattr(spec, "prepare", None))
