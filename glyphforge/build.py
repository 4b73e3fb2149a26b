"""The parallel builder: a spec's seeded shards fanned out through a session, then cached.

A *spec* is any object with these members (duck typing, see `Spec`)::

    class MySpec:
        kind = "my-dataset"      # cache kind
        n_examples: int
        shard_size: int
        seed: int
        data_dir = None          # optional; `build` fills it in when None (not in the key)
        def params(self) -> dict: ...          # everything that determines the output
        def make_shard(self, index, rng, n) -> dict[str, numpy.ndarray]: ...
        def metadata(self) -> dict: ...        # optional: JSON facts about the output,
                                               # kept as BuiltDataset.metadata

Shard ``i`` holds examples ``[i * shard_size, min((i + 1) * shard_size, n_examples))``
and draws from ``numpy.random.SeedSequence(seed).spawn(n_shards)[i]``, so the output
depends only on the spec, never on the session or its number of workers.

This module is imported by ``import glyphforge``: it must stay cheap (no Dask here).
"""
from __future__ import annotations

import copy
import logging
import numbers
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from glyphforge import config
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import CacheStore, Entry, Writer, concat_pklz
from glyphforge.session import Session, TaskFailure, open_session
from glyphforge.shards import (
    ShardRecord,
    ShardTask,
    completed_shards,
    count_shards,
    remove_partial_files,
    shard_bounds,
    shard_path,
)

log = logging.getLogger(__name__)

ARRAYS_FILE = "arrays.pklz"
BUILD_FORMAT = 1
"""Bumped when the builder's output for the same spec changes; part of every key."""

_SPEC_MEMBERS = ("kind", "n_examples", "shard_size", "seed", "params", "make_shard")


class Spec(Protocol):
    """What `build` needs from a spec (any object with these members)."""

    kind: str
    n_examples: int
    shard_size: int
    seed: int

    def params(self) -> dict[str, Any]: ...

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]: ...


class ShardError(RuntimeError):
    """A shard could not be made; ``shard`` is its index, the message says why."""

    def __init__(self, shard: int, message: str) -> None:
        self.shard = shard
        super().__init__(message)


class BuiltDataset(MapStyleDataset):
    """A built dataset in the cache: its arrays, concatenated over all shards.

    ``ds["images"]`` is one array, ``ds.arrays`` all of them (loaded once, lazily),
    ``len(ds)`` the number of examples; ``ds.key`` and ``ds.path`` locate the entry;
    ``ds.metadata`` is what the spec's optional ``metadata()`` returned (for scenes:
    ``class_names``).

    It is also map-style, like the EMNIST and Omniglot datasets: ``ds[i]`` (an int,
    slice or index array) is ``(image, target)`` with ``image = ds.images[i]`` and
    ``target`` a dict of the other arrays' rows ``i``; ``ds.batches(...)`` yields
    ``(images, targets)`` the same way. ``images`` is the ``"images"`` array, or
    the first array when the spec makes none of that name.
    """

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._arrays: dict[str, np.ndarray] | None = None

    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def path(self) -> Path:
        return self.entry.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.entry.meta

    @property
    def metadata(self) -> dict[str, Any]:
        """What the spec described of its output (``spec.metadata()``); empty if it has no such method."""
        return self.meta.get("metadata", {})

    def __len__(self) -> int:
        return int(self.meta["n_examples"])

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The concatenated arrays, read from the entry on first use."""
        if self._arrays is None:
            self._arrays = _load_arrays(self.entry)
        return self._arrays

    def take(self, indices: Any) -> dict[str, np.ndarray]:
        """Return examples ``indices`` of every array, in that order, reading one shard at a time.

        Unlike ``ds.arrays`` this never holds the whole dataset in memory (a preview
        of 16 scenes out of millions reads only what it needs).
        """
        wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= len(self)):
            raise IndexError(f"example indices must be in 0..{len(self) - 1}, got {indices!r}")
        if self._arrays is not None:
            return {name: array[wanted] for name, array in self._arrays.items()}
        rows, order = np.unique(wanted, return_inverse=True)
        return {name: array[order] for name, array in _load_arrays(self.entry, rows).items()}

    @property
    def _image_name(self) -> str:
        layout = self.meta["layout"]
        return "images" if "images" in layout else next(iter(layout))

    @property
    def images(self) -> np.ndarray:  # type: ignore[override]
        """The ``"images"`` array (or the first array when there is none of that name)."""
        return self.arrays[self._image_name]

    @property
    def labels(self) -> dict[str, np.ndarray] | None:  # type: ignore[override]
        """Every array but :attr:`images`, by name (None when there is no other array)."""
        targets = {name: array for name, array in self.arrays.items() if name != self._image_name}
        return targets or None

    def __getitem__(self, index: Any) -> Any:
        """``ds[name]``: one whole array; ``ds[i]``: the example ``(image, target dict)``."""
        if isinstance(index, str):
            if index not in self.meta["layout"]:
                raise KeyError(f"{self.entry.kind} has no array {index!r}; it has {', '.join(self.meta['layout'])}")
            return self.arrays[index]
        targets = self.labels
        return self.images[index], None if targets is None else {name: array[index] for name, array in targets.items()}

    def __repr__(self) -> str:
        arrays = list(self.meta["layout"])
        return f"<BuiltDataset {self.entry.kind} {self.key[:12]}: {len(self)} examples, arrays {arrays}>"


def _load_arrays(entry: Entry, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Fill preallocated arrays shard by shard (peak memory: the result plus one shard).

    ``rows``, sorted unique example indices, keeps only those examples; None keeps all.
    """
    n_examples, layout = entry.meta["n_examples"], entry.meta["layout"]
    count = n_examples if rows is None else len(rows)
    arrays = {
        name: np.empty((count, *info["shape"]), dtype=np.lib.format.descr_to_dtype(_descr(info["dtype"])))
        for name, info in layout.items()
    }
    start = 0
    for shard in entry.iter(ARRAYS_FILE):
        stop = start + len(next(iter(shard.values())))
        if rows is None:
            target, source = slice(start, stop), slice(None)
        else:
            first, last = np.searchsorted(rows, [start, stop])
            target, source = slice(first, last), rows[first:last] - start
        for name, array in arrays.items():
            array[target] = shard[name][source]
        start = stop
    if start != n_examples:
        raise ValueError(f"{entry.path / ARRAYS_FILE} holds {start} examples, its manifest says "
                         f"{n_examples}; remove the entry (glyphforge cache rm {entry.key[:12]}) and build again")
    return arrays


def _descr(dtype: Any) -> Any:
    """JSON turned a structured dtype's tuples into lists; make them tuples again."""
    if isinstance(dtype, list):
        return [tuple(_descr(part) for part in field) for field in dtype]
    return dtype


def check_spec(spec: Any) -> None:
    """Raise TypeError / ValueError naming what makes ``spec`` unusable by `build`."""
    missing = [name for name in _SPEC_MEMBERS if not hasattr(spec, name)]
    if missing:
        raise TypeError(
            f"{type(spec).__name__} is not a build spec: it lacks {', '.join(missing)}. A spec needs "
            "kind, n_examples, shard_size, seed, params() and make_shard(index, rng, n)"
        )
    for name, minimum in (("n_examples", 1), ("shard_size", 1), ("seed", 0)):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"spec.{name} must be an integer >= {minimum}, got {value!r}")
    for name in ("params", "make_shard"):
        if not callable(getattr(spec, name)):
            raise TypeError(f"spec.{name} must be a method, got {type(getattr(spec, name)).__name__}")


def cache_params(spec: Any) -> dict[str, Any]:
    """Return the cache parameters of ``spec``: its ``params()`` plus how it is cut and seeded."""
    return {
        "spec": spec.params(),
        "n_examples": int(spec.n_examples),
        "shard_size": int(spec.shard_size),
        "seed": int(spec.seed),
        "builder": BUILD_FORMAT,
    }


def build(
    spec: Spec, session: Session | str | None = None, data_dir: str | os.PathLike[str] | None = None,
    progress: bool = True, session_options: Mapping[str, Any] | None = None,
) -> BuiltDataset:
    """Build ``spec`` shard by shard through ``session``; return the cached dataset.

    Parameters
    ----------
    spec
        A spec (see the module docstring). If it has a ``data_dir`` attribute set to
        None, a copy with the resolved data dir is what the workers receive.
    session
        A `glyphforge.session.Session` (used, not closed), a session string such as
        ``"processes:8"`` (opened and closed here), or None for ``"local"``. Only
        opened when there is work to do.
    data_dir
        Data dir whose cache holds the result (default: see `glyphforge.config`).
        Workers write shards there: on a cluster it must be on a shared filesystem.
    progress
        Show a progress bar over shards and print a summary line (stderr).
    session_options
        Options for `glyphforge.open_session` when ``session`` is a string, e.g.
        ``{"cores": 4, "memory": "16GB"}`` for ``"slurm:8"``.

    Returns
    -------
    BuiltDataset
        On a cache hit without any work. Otherwise finished shards found from an
        interrupted earlier build are verified and reused, the others made.

    Raises
    ------
    ShardError
        A shard raised (the message holds its index and the worker's traceback) or
        its worker kept dying. Finished shards are kept: run again to resume.
    """
    check_spec(spec)
    if session_options and isinstance(session, Session):
        raise ValueError("session_options apply when build opens the session from a string; "
                         "this session is already open: give its options to open_session instead")
    root = config.data_dir(data_dir)
    if getattr(spec, "data_dir", False) is None:
        spec = copy.copy(spec)
        spec.data_dir = root
    store = CacheStore.for_data_dir(root)
    params = cache_params(spec)
    entry = store.get(spec.kind, params)
    if entry is not None:
        return BuiltDataset(entry)
    work_dirs: list[Path] = []

    def fill(writer: Writer) -> None:
        work_dirs.append(store.work_dir(spec.kind, params))
        _build_shards(spec, store.key(spec.kind, params), work_dirs[0], writer, session, dict(session_options or {}),
                      progress)

    entry = store.get_or_create(spec.kind, params, fill)
    for work_dir in work_dirs:
        shutil.rmtree(work_dir, ignore_errors=True)
    return BuiltDataset(entry)


def _build_shards(
    spec: Spec, key: str, work_dir: Path, writer: Writer, session: Session | str | None,
    session_options: dict[str, Any], progress: bool,
) -> None:
    """Make the missing shards, then concatenate all of them into ``writer``'s entry."""
    started = time.perf_counter()
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    remove_partial_files(work_dir)
    records = completed_shards(work_dir, n_shards)
    reused = len(records)
    examples_reused = sum(record["n"] for record in records.values())
    missing = [index for index in range(n_shards) if index not in records]
    workers = 0
    if missing:
        owned = not isinstance(session, Session)
        active = open_session(session or "local", **session_options) if owned else session
        try:
            _run_shards(spec, work_dir, missing, records, active, progress)
            workers = active.n_workers
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
    layout = _common_layout(records, spec.kind)
    concat_pklz([shard_path(work_dir, index) for index in range(n_shards)], writer.path / ARRAYS_FILE)
    writer.meta.update(
        n_examples=int(spec.n_examples),
        n_shards=n_shards,
        layout=layout,
        shard_bytes=[records[index]["size"] for index in range(n_shards)],
        metadata=records[0].get("metadata", {}),
    )
    seconds = time.perf_counter() - started
    summary = (
        f"built {spec.kind} {key[:12]}: {n_shards} shards ({n_shards - reused} made, {reused} reused), "
        f"{spec.n_examples} examples in {seconds:.1f} s on {workers} workers "
        f"({(spec.n_examples - examples_reused) / seconds:,.0f} examples/s made)"
    )
    log.info(summary)
    if progress:
        print(summary, file=sys.stderr)


def _run_shards(
    spec: Spec, work_dir: Path, missing: list[int], records: dict[int, ShardRecord], session: Session, progress: bool
) -> None:
    """Map `ShardTask` over the ``missing`` shards, adding each finished one to ``records``."""
    from tqdm import tqdm

    n_shards = count_shards(spec.n_examples, spec.shard_size)
    done_examples = sum(record["n"] for record in records.values())
    with tqdm(total=spec.n_examples, initial=done_examples, unit="ex", unit_scale=True,
              desc=f"{spec.kind}", disable=not progress, file=sys.stderr) as bar:
        bar.set_postfix_str(f"shards {len(records)}/{n_shards}")
        for _, record in session.map(ShardTask(spec, str(work_dir)), missing):
            records[record["shard"]] = record
            bar.update(record["n"])
            bar.set_postfix_str(f"shards {len(records)}/{n_shards}")


def _common_layout(records: dict[int, ShardRecord], kind: str) -> dict[str, Any]:
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
