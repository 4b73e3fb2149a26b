"""Export a built dataset as ``.npy`` files, shard by shard, for memory-mapped reading.

``export(ds, directory)`` writes ``<directory>/<array name>.npy`` for every array
(``images.npy``, ``labels.npy``, ...) and ``<directory>/metadata.json``::

    {"key": ..., "kind": ..., "n_examples": ..., "arrays": {name: {"dtype", "shape"}},
     "metadata": <the spec's metadata()>, "params": <the build's parameters>}

``numpy.load(directory / "images.npy", mmap_mode="r")`` then gives memory-speed
random access without decoding anything. Each ``.npy`` file gets its header, then the
rows of one decoded shard after another, written sequentially (no memory map: the
export's resident memory stays at one shard, not the files' size). The
export is atomic: it is written in a hidden directory beside ``directory`` and
renamed into place when complete, so a ``directory`` with ``metadata.json`` is
always a whole export (an interrupted one leaves only the hidden directory, removed
by the next export).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from glyphforge._checks import PathLike
from glyphforge._files import make_temp_dir

if TYPE_CHECKING:
    from glyphforge.builds.dataset import BuiltDataset

FORMATS = ("npy",)
METADATA_FILE = "metadata.json"
_STAGING_PREFIX = ".export-"


def export(dataset: BuiltDataset, directory: PathLike, *, format: str = "npy", overwrite: bool = False) -> Path:
    """Write ``dataset``'s arrays as ``.npy`` files and ``metadata.json`` into ``directory``; return it.

    Parameters
    ----------
    dataset
        A built dataset.
    directory
        Where the files go. It must not exist, or be empty, or hold an earlier export
        of the same dataset (then nothing is written: it is returned as it is), or
        ``overwrite`` must be True.
    format
        ``"npy"`` (the only format).
    overwrite
        Replace whatever ``directory`` holds.

    Raises
    ------
    FileExistsError
        ``directory`` holds other files and ``overwrite`` is False.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    target = Path(directory).expanduser()
    if target.exists() and not overwrite and any(target.iterdir()):
        if _exported_key(target) == dataset.key:
            return target
        raise FileExistsError(f"{target} is not empty and holds no export of {dataset.key[:12]}: give a new or "
                              "empty directory, or overwrite=True (--overwrite) to replace its contents")
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in target.parent.glob(f"{_STAGING_PREFIX}{target.name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)  # an interrupted export of this directory
    staging = make_temp_dir(f"{_STAGING_PREFIX}{target.name}-", target.parent)
    try:
        _write(dataset, staging)
        if target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _write(dataset: BuiltDataset, staging: Path) -> None:
    reader = dataset.reopened(cache_shards=0)
    n = len(reader)
    dtypes = {name: reader.dtype(name) for name in reader.layout}
    with contextlib.ExitStack() as files:
        outputs = {name: files.enter_context(open(staging / f"{name}.npy", "wb")) for name in reader.layout}
        for name, output in outputs.items():
            header = {"descr": np.lib.format.dtype_to_descr(dtypes[name]), "fortran_order": False,
                      "shape": (n, *reader.layout[name]["shape"])}
            np.lib.format.write_array_header_1_0(output, header)
        for number in range(len(reader.index)):
            for name, array in reader.shard(number).items():
                outputs[name].write(np.ascontiguousarray(array, dtypes[name]).data)
    document = {
        "key": reader.key,
        "kind": reader.entry.kind,
        "n_examples": n,
        "arrays": {name: {"dtype": str(reader.dtype(name)), "shape": [n, *info["shape"]]}
                   for name, info in reader.layout.items()},
        "metadata": reader.metadata,
        "params": reader.entry.params,
    }
    (staging / METADATA_FILE).write_text(json.dumps(document, indent=1), encoding="utf-8")


def _exported_key(directory: Path) -> str | None:
    try:
        key = json.loads((directory / METADATA_FILE).read_text(encoding="utf-8"))["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return key if isinstance(key, str) else None
