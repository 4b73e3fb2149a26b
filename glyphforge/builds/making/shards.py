"""Shards of a build: how a spec is cut, seeded, written and verified (runs on workers).

A shard file (a run of gzip members of ``.npy`` arrays in blocks of rows,
`glyphforge.cache.npy_members`) is written atomically (``dump_shard``: temporary file +
``os.replace``), then a JSON record beside it with the file's sha256, size, modification
time, array layout and where its blocks are (``blocks``: the builder joins them into the
entry's ``blocks.npy``, `glyphforge.builds.reading.blocks`). A shard counts as complete
only when its record exists and the file still has the recorded size and modification
time (a cheap ``stat``, so resuming 20,000 finished shards does not read them); its sha256 is checked when the builder
joins the shards, which reads every byte anyway. A build killed at any moment
resumes from exactly the shards that were finished.
"""
from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._files import atomic_path, sha256_file
from glyphforge.cache.declared import layout_problem
from glyphforge.cache.npy_members import dump_shard

#: One shard's record: ``{"shard", "n", "size", "mtime_ns", "sha256", "layout", "blocks"}`` (``layout`` in the
#: order ``make_shard`` returned the arrays: `images_array` reads it; ``blocks`` as `dump_shard` returns them), plus
#: ``"metadata"`` (what ``spec.metadata()`` returned) for specs that have that optional method.
ShardRecord = dict[str, Any]
#: Dtype kinds a built array may not have: dates, time spans and records (torch's default collate batches none).
UNBATCHED_KINDS = "MmV"


def count_shards(n_examples: int, shard_size: int) -> int:
    """Return ``ceil(n_examples / shard_size)``."""
    return math.ceil(n_examples / shard_size)


def shard_bounds(index: int, n_examples: int, shard_size: int) -> tuple[int, int]:
    """Return ``(start, stop)`` of shard ``index``'s examples; the last shard gets the remainder."""
    start = index * shard_size
    return start, min(start + shard_size, n_examples)


def shard_rng(seed: int, index: int) -> np.random.Generator:
    """Return shard ``index``'s Generator: ``SeedSequence(seed).spawn(n_shards)[index]``.

    A spawned child is ``SeedSequence(seed, spawn_key=(index,))`` whatever ``n_shards``
    is, so each worker derives its own stream without spawning all the others.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def shard_path(work_dir: Path, index: int) -> Path:
    """Return the data file of shard ``index`` in ``work_dir``."""
    return work_dir / f"shard-{index:06d}.pklz"


def _record_path(work_dir: Path, index: int) -> Path:
    return work_dir / f"shard-{index:06d}.json"


def array_layout(arrays: Any, index: int, n: int) -> dict[str, dict[str, Any]]:
    """Check what ``make_shard`` returned; return ``{name: {"dtype": descr, "shape": per-example}}``.

    Raises
    ------
    TypeError, ValueError
        Naming the shard and what was wrong, unless ``arrays`` is a non-empty dict of
        string names to numpy arrays that each hold ``n`` examples along the first axis, in
        a layout readers accept (`glyphforge.cache.declared.layout_problem`) that torch's
        default collate batches (strings one per example at most; no dates or records).
    """
    where = f"make_shard({index}, rng, {n})"
    if not isinstance(arrays, Mapping) or not arrays:
        raise TypeError(f"{where} returned {type(arrays).__name__}; it must return a non-empty "
                        "dict of name -> numpy array")
    layout = {}
    for name, array in arrays.items():
        if not isinstance(name, str) or not isinstance(array, np.ndarray):
            raise TypeError(f"{where} returned {name!r}: {type(array).__name__}; it must return "
                            "string names mapped to numpy arrays")
        if array.ndim == 0 or len(array) != n:
            raise ValueError(f"{where} returned {name!r} of shape {array.shape}; the first axis of "
                             f"every array must hold the shard's n={n} examples")
        if array.dtype.hasobject:
            raise TypeError(f"{where} returned {name!r} with dtype {array.dtype}; object arrays "
                            "cannot be cached safely, use numeric, bool or fixed-width string dtypes")
        if array.dtype.kind in UNBATCHED_KINDS or (array.dtype.kind in "SU" and array.ndim > 1):
            raise TypeError(f"{where} returned {name!r} with dtype {array.dtype} and shape {array.shape}, which "
                            "torch's default collate cannot batch (every DataLoader must): give strings one per "
                            "example at most, class names as integer codes with the names in metadata()'s "
                            "'class_names', dates as integers")
        layout[name] = {"dtype": np.lib.format.dtype_to_descr(array.dtype), "shape": list(array.shape[1:])}
    problem = layout_problem(layout)  # what a reader would refuse (`glyphforge.cache.declared`)
    if problem is not None:
        raise ValueError(f"{where} returned arrays a built dataset cannot hold: {problem}")
    return layout


def images_array(layout: Mapping[str, Any], metadata: Mapping[str, Any], kind: str) -> str:
    """Return the name of a build's images array: what ``ds[i]``, ``ds.images`` and batches give first.

    It is ``metadata["images"]`` when the spec's ``metadata()`` names one, else the array
    called ``"images"``, else the first array ``make_shard`` returned (``layout`` keeps
    that order).

    Raises
    ------
    ValueError
        ``metadata["images"]`` is not the name of an array ``make_shard`` returned.
    """
    named = metadata.get("images")
    if named is None:
        return "images" if "images" in layout else next(iter(layout))
    if not isinstance(named, str) or named not in layout:
        raise ValueError(f"{kind}: metadata() names images={named!r}, but make_shard returned the arrays "
                         f"{', '.join(map(repr, layout))}; name one of these, or drop 'images' from metadata() "
                         "to use the first array make_shard returns")
    return named


def _write_json(path: Path, document: Any) -> None:
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(document), encoding="utf-8")


def takes_data_dir(method: Callable[..., Any]) -> bool:
    """Return True when ``method`` accepts a ``data_dir`` keyword (see `glyphforge.builds.making.builder`)."""
    parameters = inspect.signature(method).parameters.values()
    return any(
        (parameter.name == "data_dir" and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY)
        or parameter.kind is inspect.Parameter.VAR_KEYWORD
        for parameter in parameters
    )


def call_with_data_dir(method: Callable[..., Any], *args: Any, data_dir: str) -> Any:
    """Call ``method(*args)``, adding ``data_dir=`` when it takes that keyword."""
    return method(*args, data_dir=data_dir) if takes_data_dir(method) else method(*args)


@dataclass(frozen=True)
class ShardTask:
    """Make and write one shard of ``spec`` into ``work_dir``: the function a session maps.

    Called with a shard index, returns that shard's record (small, cheap to send back).
    ``data_dir`` is the build's data dir, given to the spec's ``make_shard`` and
    ``metadata`` when they take a ``data_dir`` keyword.
    """

    spec: Any
    work_dir: str
    data_dir: str

    def __call__(self, index: int) -> ShardRecord:
        arrays, record = make_shard_arrays(self.spec, index, self.data_dir)
        path = shard_path(Path(self.work_dir), index)
        blocks = dump_shard(arrays, path)
        written = path.stat()
        record.update(size=written.st_size, mtime_ns=written.st_mtime_ns, sha256=sha256_file(path),
                      blocks=blocks.tolist())
        _write_json(_record_path(Path(self.work_dir), index), record)
        return record


def make_shard_arrays(spec: Any, index: int, data_dir: str) -> tuple[dict[str, np.ndarray], ShardRecord]:
    """Make shard ``index`` of ``spec``; return its arrays and the start of its record (no file facts yet).

    The record holds ``shard``, ``n``, ``layout`` and, for a spec with ``metadata()``,
    ``metadata``. ``data_dir`` is given to ``make_shard`` and ``metadata`` when they take it.

    Raises
    ------
    TypeError, ValueError
        ``make_shard`` returned something unusable, or ``metadata()`` names no array as images.
    """
    start, stop = shard_bounds(index, spec.n_examples, spec.shard_size)
    arrays = call_with_data_dir(spec.make_shard, index, shard_rng(spec.seed, index), stop - start, data_dir=data_dir)
    layout = array_layout(arrays, index, stop - start)
    record: ShardRecord = {"shard": index, "n": stop - start, "layout": layout}
    if callable(getattr(spec, "metadata", None)):
        record["metadata"] = call_with_data_dir(spec.metadata, data_dir=data_dir)
    images_array(layout, record.get("metadata", {}), spec.kind)  # a bad images= fails here, not at the join
    return dict(arrays), record


def completed_shards(work_dir: Path, n_shards: int) -> dict[int, ShardRecord]:
    """Return the records of shards in ``work_dir`` whose files still have their recorded size and mtime.

    Only ``stat``: the sha256 is checked when the shards are joined (`concat_pklz`).
    """
    done = {}
    for index in _recorded_shards(work_dir, n_shards):
        try:
            record = json.loads(_record_path(work_dir, index).read_text(encoding="utf-8"))
            found = shard_path(work_dir, index).stat()
            if (found.st_size, found.st_mtime_ns) == (record["size"], record["mtime_ns"]) and "blocks" in record:
                done[index] = record
        except (OSError, ValueError, KeyError, TypeError):
            continue  # missing, half-written, changed or foreign: make it again
    return done


def _recorded_shards(work_dir: Path, n_shards: int) -> list[int]:
    """The shard indices below ``n_shards`` that have a record in ``work_dir`` (one directory listing)."""
    found = []
    with os.scandir(work_dir) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith("shard-") and name.endswith(".json") and name[6:-5].isdigit():
                index = int(name[6:-5])
                if index < n_shards:
                    found.append(index)
    return sorted(found)


def forget_shard(work_dir: Path, index: int) -> None:
    """Delete shard ``index``'s record and file, so that the next build makes it again."""
    _record_path(work_dir, index).unlink(missing_ok=True)
    shard_path(work_dir, index).unlink(missing_ok=True)


def remove_partial_files(work_dir: Path) -> None:
    """Delete temporary files a killed writer left in ``work_dir``."""
    for leftover in work_dir.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
